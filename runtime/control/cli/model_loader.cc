#include "runtime/control/cli/model_loader.h"

#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/control/cli/cli_util.h"
#include "runtime/train/model_io.h"

namespace xhc::cli {

absl::StatusOr<LoadedModel> LoadModelFromFlags(const Flags& flags, int seq_len) {
  LoadedModel out;
  std::map<std::string, Tensor> tensors;
  if (flags.Has("checkpoint")) {
    ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(flags.Get("checkpoint")));
    ASSIGN_OR_RETURN(LoadedCheckpoint ckpt, LoadCheckpoint(dir));
    ASSIGN_OR_RETURN(out.config, ParseModelOnly(ckpt.manifest.config_yaml));
    tensors = std::move(ckpt.tensors);
  } else if (flags.Has("config") && flags.Has("weights")) {
    ASSIGN_OR_RETURN(std::string yaml, ReadWholeFile(flags.Get("config")));
    absl::StatusOr<ModelConfig> cfg = ParseModelOnly(yaml);
    if (!cfg.ok()) {
      return absl::Status(cfg.status().code(),
                          absl::StrCat(flags.Get("config"), ": ", cfg.status().message()));
    }
    out.config = *cfg;
    ASSIGN_OR_RETURN(SafetensorsContents contents, ReadSafetensorsPath(flags.Get("weights")));
    tensors = std::move(contents.tensors);
  } else {
    return absl::InvalidArgumentError("give --checkpoint DIR, or --config FILE and --weights PATH");
  }
  if (seq_len > 0) out.config.seq_len = seq_len;
  out.params = std::make_unique<model::ParamSetT<float>>(
      model::BuildStageParams<float>(out.config, model::StageSpec::Full(out.config)));
  RETURN_IF_ERROR(train::LoadParams(tensors, /*with_optim=*/false, out.params.get()));
  return out;
}

}  // namespace xhc::cli
