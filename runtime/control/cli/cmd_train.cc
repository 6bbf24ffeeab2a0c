// xhc train --config FILE [--steps N] [--out DIR] [--resume]
#include <cstdio>

#include "base/status_macros.h"
#include "runtime/common/config.h"
#include "runtime/control/cli/cli_util.h"
#include "runtime/control/cli/commands.h"
#include "runtime/train/trainer.h"

namespace xhc::cli {
namespace {

absl::Status Train(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      Flags flags,
      ParseFlagsOrHelp("train", "--config FILE [--steps N] [--out DIR] [--resume]", args,
                       {{"config", "job config (YAML)", false, true},
                        {"steps", "override train.steps", false, false},
                        {"out", "run directory (default runs/train-<time>)"},
                        {"resume", "continue from OUT/checkpoints", true, false}}));
  ASSIGN_OR_RETURN(Config config, LoadConfigFile(flags.Get("config")));
  train::TrainOptions options;
  ASSIGN_OR_RETURN(options.steps, flags.GetCount("steps", -1));
  options.out_dir = flags.Get("out", DefaultRunDir("train"));
  options.resume = flags.GetBool("resume");
  if (options.resume && !flags.Has("out")) {
    return absl::InvalidArgumentError("--resume needs --out RUN_DIR");
  }
  std::printf("xhc train: %s residual, N=%d, %d layers, d_model %d; run directory %s\n",
              ResidualTypeName(config.model.residual.type).c_str(), config.model.residual.n_streams,
              config.model.n_layers, config.model.d_model, options.out_dir.c_str());
  ASSIGN_OR_RETURN(train::TrainResult result, train::RunTraining(config, options));
  std::printf("done: steps %lld..%lld, final val loss %.4f, %.0f tokens/s\n",
              static_cast<long long>(result.start_step), static_cast<long long>(result.end_step),
              result.final_val_loss, result.tokens_per_s);
  return absl::OkStatus();
}

}  // namespace

int RunTrain(const std::vector<std::string>& args) {
  absl::Status s = Train(args);
  return s.ok() ? 0 : Fail("train", s);
}

}  // namespace xhc::cli
