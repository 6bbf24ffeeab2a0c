#ifndef XHC_BASE_MEDIAN_H_
#define XHC_BASE_MEDIAN_H_

// The median the benchmarks and timing tests report.

#include <algorithm>
#include <vector>

namespace xhc {

// The middle value of v; for an even count the larger of the two middle values (a value that
// was measured, not a mean of two); 0 when v is empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace xhc

#endif  // XHC_BASE_MEDIAN_H_
