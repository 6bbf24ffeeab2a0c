#ifndef XHC_CUDA_CHECK_SHIM_ABSL_STRINGS_STR_CAT_H_
#define XHC_CUDA_CHECK_SHIM_ABSL_STRINGS_STR_CAT_H_

// See ../status/status.h: absl::StrCat over strings and numbers.

#include <sstream>
#include <string>

namespace absl {

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace absl

#endif  // XHC_CUDA_CHECK_SHIM_ABSL_STRINGS_STR_CAT_H_
