#ifndef XHC_KERNELS_CPU_XHC_SKINNY_GEMM_ISA_H_
#define XHC_KERNELS_CPU_XHC_SKINNY_GEMM_ISA_H_

// Run-time choice of the instruction set the skinny GEMM kernels (skinny_gemm.h) use.
//
// The default is the best path the CPU supports (__builtin_cpu_supports). The environment
// variable XHC_CPU_ISA=avx512|avx2|generic forces one, e.g. to compare paths on one machine.
// A value that is unknown, or names a path this CPU lacks, is an error, never a silent
// fallback (the run would not be the one asked for): SkinnyIsaFromEnv() returns it as a
// Status for binaries that check at start-up; the kernels themselves, on first use, print the
// same message once on stderr and abort.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xhc::kernels::cpu {

enum class SkinnyIsa { kGeneric, kAvx2, kAvx512 };

// "generic", "avx2", "avx512": the XHC_CPU_ISA spellings.
const char* SkinnyIsaName(SkinnyIsa isa);

// avx512: AVX-512F + AVX2 + FMA; avx2: AVX2 + FMA; generic: always.
bool CpuSupportsSkinnyIsa(SkinnyIsa isa);

// The paths this CPU supports, best first, comma-separated (e.g. "avx2,generic").
std::string CpuSkinnyIsas();

// XHC_CPU_ISA if set (InvalidArgument naming the variable, the value and CpuSkinnyIsas() when
// it is unknown or unsupported), else the best supported path.
absl::StatusOr<SkinnyIsa> SkinnyIsaFromEnv();

// The path the kernels run: a testing override if set, else SkinnyIsaFromEnv() resolved once
// (aborting with its message if that failed).
SkinnyIsa ActiveSkinnyIsa();
inline const char* ActiveSkinnyIsaName() { return SkinnyIsaName(ActiveSkinnyIsa()); }

// Tests: run `isa` from now on (FailedPrecondition, nothing changed, if the CPU lacks it).
absl::Status SetSkinnyIsaForTesting(SkinnyIsa isa);
// Tests: back to the environment's / the CPU's choice.
void ClearSkinnyIsaForTesting();

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_SKINNY_GEMM_ISA_H_
