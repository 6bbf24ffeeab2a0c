// Fuzzes ParseConfig and ParseModelOnly (job YAML: from users, and from every checkpoint's
// manifest on resume). A model block that validates must round-trip through
// ModelConfigToYaml with the same hash (the hash workers compare before accepting a plan).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/common/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<xhc::Config> config = xhc::ParseConfig(text);
  if (!config.ok() && config.status().message().empty()) std::abort();
  absl::StatusOr<xhc::ModelConfig> model = xhc::ParseModelOnly(text);
  if (!model.ok()) {
    if (model.status().message().empty()) std::abort();
    return 0;
  }
  absl::StatusOr<xhc::ModelConfig> again = xhc::ParseModelOnly(xhc::ModelConfigToYaml(*model));
  if (!again.ok() || xhc::ModelConfigHash(*again) != xhc::ModelConfigHash(*model)) std::abort();
  return 0;
}
