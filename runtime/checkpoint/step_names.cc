#include "runtime/checkpoint/step_names.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace xhc {

std::string StepDirName(int64_t step) { return absl::StrFormat("step-%06d", step); }

int64_t StepOfDirName(absl::string_view name) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "step-")) return -1;
  if (rest.empty() || rest.find_first_not_of("0123456789") != absl::string_view::npos) return -1;
  // Digits beyond int64 are not a step (std::stoll threw here: found by latest_fuzzer).
  int64_t step = -1;
  if (!absl::SimpleAtoi(rest, &step)) return -1;
  return step;
}

absl::StatusOr<std::string> ParseLatest(absl::string_view text, const std::string& origin) {
  std::string name(absl::StripAsciiWhitespace(text));
  if (StepOfDirName(name) < 0) {
    return absl::DataLossError(absl::StrCat(origin, ": '", name, "' is not a step name"));
  }
  return name;
}

}  // namespace xhc
