#include "base/self_exec.h"

#include <cstdlib>

namespace xhc {

std::vector<std::string> SelfCommand() {
  const char* bundle = std::getenv("XHC_BUNDLE");
  if (bundle == nullptr || *bundle == '\0') return {"/proc/self/exe"};
  const std::string root = bundle;
  const char* path = std::getenv("XHC_BUNDLE_LIBRARY_PATH");
  return {root + "/lib/ld-linux-x86-64.so.2", "--library-path",
          path != nullptr && *path != '\0' ? std::string(path) : root + "/lib", root + "/bin/xhc"};
}

}  // namespace xhc
