#ifndef XHC_TESTS_DASHBOARD_PNG_PIXELS_H_
#define XHC_TESTS_DASHBOARD_PNG_PIXELS_H_

// Reads an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium's --screenshot writes) with
// zlib and counts its colours, so a test can tell a drawn page from a blank one.

#include <string>

#include "absl/status/statusor.h"

namespace xhc::testing {

struct PngStats {
  int width = 0, height = 0;
  int distinct_colors = 0;
  double most_common_share = 0;  // fraction of pixels that have the most common colour
};

absl::StatusOr<PngStats> ReadPngStats(const std::string& path);

}  // namespace xhc::testing

#endif  // XHC_TESTS_DASHBOARD_PNG_PIXELS_H_
