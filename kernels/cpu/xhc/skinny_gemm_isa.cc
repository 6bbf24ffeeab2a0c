#include "kernels/cpu/xhc/skinny_gemm_isa.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace xhc::kernels::cpu {
namespace {

constexpr SkinnyIsa kBestFirst[] = {SkinnyIsa::kAvx512, SkinnyIsa::kAvx2, SkinnyIsa::kGeneric};
constexpr char kEnvVar[] = "XHC_CPU_ISA";

// -1: no override; else the SkinnyIsa value. Read on every kernel call (one relaxed load).
std::atomic<int> g_override{-1};

}  // namespace

const char* SkinnyIsaName(SkinnyIsa isa) {
  switch (isa) {
    case SkinnyIsa::kAvx512: return "avx512";
    case SkinnyIsa::kAvx2: return "avx2";
    case SkinnyIsa::kGeneric: return "generic";
  }
  return "?";
}

bool CpuSupportsSkinnyIsa(SkinnyIsa isa) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  const bool avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  switch (isa) {
    case SkinnyIsa::kAvx512: return avx2_fma && __builtin_cpu_supports("avx512f");
    case SkinnyIsa::kAvx2: return avx2_fma;
    case SkinnyIsa::kGeneric: return true;
  }
  return false;
#else
  return isa == SkinnyIsa::kGeneric;  // the vector paths are x86-64 only
#endif
}

std::string CpuSkinnyIsas() {
  std::string out;
  for (SkinnyIsa isa : kBestFirst) {
    if (CpuSupportsSkinnyIsa(isa))
      absl::StrAppend(&out, out.empty() ? "" : ",", SkinnyIsaName(isa));
  }
  return out;
}

absl::StatusOr<SkinnyIsa> SkinnyIsaFromEnv() {
  const char* env = std::getenv(kEnvVar);
  if (env == nullptr || *env == '\0') {
    for (SkinnyIsa isa : kBestFirst) {
      if (CpuSupportsSkinnyIsa(isa)) return isa;
    }
    return SkinnyIsa::kGeneric;
  }
  for (SkinnyIsa isa : kBestFirst) {
    if (std::strcmp(env, SkinnyIsaName(isa)) != 0) continue;
    if (CpuSupportsSkinnyIsa(isa)) return isa;
    return absl::InvalidArgumentError(absl::StrCat(kEnvVar, "=", env, ": this CPU lacks ", env,
                                                   "; it supports ", CpuSkinnyIsas()));
  }
  return absl::InvalidArgumentError(absl::StrCat(kEnvVar, "=", env,
                                                 ": unknown (avx512, avx2 or generic); this CPU "
                                                 "supports ",
                                                 CpuSkinnyIsas()));
}

SkinnyIsa ActiveSkinnyIsa() {
  const int forced = g_override.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<SkinnyIsa>(forced);
  static const SkinnyIsa chosen = [] {
    absl::StatusOr<SkinnyIsa> isa = SkinnyIsaFromEnv();
    if (!isa.ok()) {
      std::fprintf(stderr, "xhc skinny GEMM: %s\n", std::string(isa.status().message()).c_str());
      std::abort();
    }
    return *isa;
  }();
  return chosen;
}

absl::Status SetSkinnyIsaForTesting(SkinnyIsa isa) {
  if (!CpuSupportsSkinnyIsa(isa)) {
    return absl::FailedPreconditionError(
        absl::StrCat("CPU lacks ", SkinnyIsaName(isa), "; it supports ", CpuSkinnyIsas()));
  }
  g_override.store(static_cast<int>(isa));
  return absl::OkStatus();
}

void ClearSkinnyIsaForTesting() { g_override.store(-1); }

}  // namespace xhc::kernels::cpu
