#include "runtime/cli/blas_env.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstring>

namespace xhc::cli {

void MaybeReexecWithBlasCoretype(char** argv) {
  if (getenv("OPENBLAS_CORETYPE") != nullptr) return;
  const char* autotune = getenv("XHC_BLAS_AUTOTUNE");
  if (autotune != nullptr && std::strcmp(autotune, "0") == 0) return;
  __builtin_cpu_init();
  const char* coretype = nullptr;
  if (__builtin_cpu_supports("avx512f")) {
    coretype = "SkylakeX";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    coretype = "Haswell";
  }
  if (coretype == nullptr) return;
  setenv("OPENBLAS_CORETYPE", coretype, 1);
  execv("/proc/self/exe", argv);
  // execv failed: continue with the default kernels.
  unsetenv("OPENBLAS_CORETYPE");
}

}  // namespace xhc::cli
