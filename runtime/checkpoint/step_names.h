#ifndef XHC_RUNTIME_CHECKPOINT_STEP_NAMES_H_
#define XHC_RUNTIME_CHECKPOINT_STEP_NAMES_H_

// Step directory names ("step-000120") and the LATEST pointer's text: the only parts of a
// checkpoint root's layout that are parsed from bytes on disk (FORMAT.md).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xhc {

// "step-000120".
std::string StepDirName(int64_t step);

// The step of a directory name written by StepDirName, or -1 for any other name.
int64_t StepOfDirName(absl::string_view name);

// The step directory name LATEST's text points to (surrounding whitespace ignored);
// kDataLoss naming `origin` when it is not one StepDirName could have written.
absl::StatusOr<std::string> ParseLatest(absl::string_view text, const std::string& origin);

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_STEP_NAMES_H_
