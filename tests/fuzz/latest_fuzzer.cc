// Fuzzes ParseLatest (the LATEST pointer) and StepOfDirName (every directory name under a
// checkpoint root). A name that parses must be one StepDirName writes for that step.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/checkpoint/step_names.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const int64_t step = xhc::StepOfDirName(text);
  if (step < -1) std::abort();
  absl::StatusOr<std::string> name = xhc::ParseLatest(text, "fuzz/LATEST");
  if (name.ok()) {
    const int64_t latest = xhc::StepOfDirName(*name);
    if (latest < 0) std::abort();
    if (xhc::StepOfDirName(xhc::StepDirName(latest)) != latest) std::abort();
  } else if (name.status().message().empty()) {
    std::abort();
  }
  return 0;
}
