#ifndef XHC_BASE_BANDWIDTH_H_
#define XHC_BASE_BANDWIDTH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xhc {

// A link rate as tc writes it: a number and kbit, mbit or gbit (powers of 1000, any case,
// an optional "/s": "1gbit", "200Mbit/s", "2.5gbit"), in bits per second. "" and "off" are
// 0: no shaping. Refused (kInvalidArgument naming `what`, the key or flag it came from)
// otherwise, and below 1 Mbit/s or above 100 Gbit/s (a job would crawl, or the kernel's
// token bucket would not shape).
absl::StatusOr<int64_t> ParseBandwidth(absl::string_view text, absl::string_view what);

// "1 Gbit/s", "200 Mbit/s", "2.5 Gbit/s": for logs.
std::string FormatBandwidth(int64_t bits_per_s);

}  // namespace xhc

#endif  // XHC_BASE_BANDWIDTH_H_
