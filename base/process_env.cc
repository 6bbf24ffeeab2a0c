#include "base/process_env.h"

#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>

namespace xhc {

void MaybeReexecWithTunedEnv(char** argv) {
  const char* autotune = getenv("XHC_BLAS_AUTOTUNE");
  if (autotune != nullptr && std::strcmp(autotune, "0") == 0) return;
  bool changed = false;
  if (getenv("OPENBLAS_CORETYPE") == nullptr) {
    __builtin_cpu_init();
    const char* coretype = nullptr;
    if (__builtin_cpu_supports("avx512f")) {
      coretype = "SkylakeX";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      coretype = "Haswell";
    }
    if (coretype != nullptr) {
      setenv("OPENBLAS_CORETYPE", coretype, 1);
      changed = true;
    }
  }
  if (getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    changed = true;
  }
  // Appended to the user's tunables unless they choose glibc.malloc.hugetlb themselves.
  const char* tunables = getenv("GLIBC_TUNABLES");
  if (tunables == nullptr || std::strstr(tunables, "glibc.malloc.hugetlb") == nullptr) {
    std::string value = tunables != nullptr && *tunables != '\0' ? std::string(tunables) + ":" : "";
    value += kHugePagesTunable;
    setenv("GLIBC_TUNABLES", value.c_str(), 1);
    changed = true;
  }
  if (!changed) return;
  execv("/proc/self/exe", argv);
  // execv failed: carry on with the environment as it was (slower, still correct).
}

void KeepFreedMemoryInProcess() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

}  // namespace xhc
