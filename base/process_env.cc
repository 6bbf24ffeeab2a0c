#include "base/process_env.h"

#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "base/self_exec.h"

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
  std::vector<std::string> self = SelfCommand();
  // Started through an explicit dynamic loader without XHC_BUNDLE: /proc/self/exe is the
  // loader, which would take our arguments for its own. Carry on untuned instead.
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (self.size() == 1 && n > 0 && std::string(exe, n).find("/ld-linux") != std::string::npos) {
    return;
  }
  std::vector<char*> args;
  for (std::string& a : self) args.push_back(a.data());
  for (char** a = argv + 1; *a != nullptr; ++a) args.push_back(*a);
  args.push_back(nullptr);
  execv(args[0], args.data());
  // execv failed: carry on with the environment as it was (slower, still correct).
}

void KeepFreedMemoryInProcess() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
}

}  // namespace xhc
