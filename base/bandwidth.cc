#include "base/bandwidth.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xhc {

absl::StatusOr<int64_t> ParseBandwidth(absl::string_view text, absl::string_view what) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  if (t.empty() || t == "off") return 0;
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": \"", text, "\" ", why));
  };
  if (absl::EndsWith(t, "/s")) t.resize(t.size() - 2);
  double scale = 0;
  for (const auto& [suffix, factor] :
       {std::pair<const char*, double>{"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}}) {
    if (absl::EndsWith(t, suffix)) {
      t.resize(t.size() - std::string_view(suffix).size());
      scale = factor;
      break;
    }
  }
  double number = 0;
  if (scale == 0 || !absl::SimpleAtod(absl::StripAsciiWhitespace(t), &number) ||
      !std::isfinite(number)) {
    return refuse("is not a rate: write a number and kbit, mbit or gbit (\"1gbit\"), or off");
  }
  const double bits = number * scale;
  if (bits < 1e6) return refuse("is below 1 Mbit/s");
  if (bits > 100e9) return refuse("is above 100 Gbit/s");
  return static_cast<int64_t>(std::llround(bits));
}

std::string FormatBandwidth(int64_t bits_per_s) {
  if (bits_per_s >= 1'000'000'000) return absl::StrFormat("%g Gbit/s", bits_per_s / 1e9);
  if (bits_per_s >= 1'000'000) return absl::StrFormat("%g Mbit/s", bits_per_s / 1e6);
  return absl::StrFormat("%g kbit/s", bits_per_s / 1e3);
}

}  // namespace xhc
