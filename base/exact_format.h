#ifndef XHC_BASE_EXACT_FORMAT_H_
#define XHC_BASE_EXACT_FORMAT_H_

#include <string>
#include <vector>

namespace xhc {

// "1.2345678901234567, ..." with %.17g: every double round-trips, so losses written by the
// trainer and by the controller can be compared bit for bit as text.
std::string ExactList(const std::vector<double>& values);

}  // namespace xhc

#endif  // XHC_BASE_EXACT_FORMAT_H_
