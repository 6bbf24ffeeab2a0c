#ifndef XHC_RUNTIME_CONTROL_CLI_MODEL_LOADER_H_
#define XHC_RUNTIME_CONTROL_CLI_MODEL_LOADER_H_

// Builds a whole model from --checkpoint DIR, or from --config FILE + --weights PATH
// (safetensors named as in model-spec section 7, e.g. exported from PyTorch).

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"
#include "runtime/control/cli/flags.h"
#include "runtime/model/params.h"

namespace xhc::cli {

struct LoadedModel {
  ModelConfig config;  // seq_len overridden by the caller's
  std::unique_ptr<model::ParamSetT<float>> params;
};

// seq_len > 0 overrides the config's (RoPE has no length limit).
absl::StatusOr<LoadedModel> LoadModelFromFlags(const Flags& flags, int seq_len);

}  // namespace xhc::cli

#endif  // XHC_RUNTIME_CONTROL_CLI_MODEL_LOADER_H_
