#include "base/exact_format.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xhc {

std::string ExactList(const std::vector<double>& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) {
    absl::StrAppend(&out, i ? ", " : "", absl::StrFormat("%.17g", values[i]));
  }
  return out;
}

}  // namespace xhc
