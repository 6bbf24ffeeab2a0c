// xhc ablate: the residual-variant quality study (runtime/lab/ablation/ablation.h).
#include <iostream>

#include "runtime/control/cli/cli_util.h"
#include "runtime/control/cli/commands.h"
#include "runtime/lab/ablation/ablation.h"

namespace xhc::cli {

int RunAblateCommand(const std::vector<std::string>& args) {
  auto flags = ParseFlagsOrHelp(
      "ablate", "--config FILE [--out DIR]", args,
      {{"config", "ablation config (YAML, see configs/ablation.yaml)", false, true},
       {"out",
        "output directory (default runs/ablation); rerun with "
        "the same one to resume"}});
  if (!flags.ok()) return Fail("ablate", flags.status());
  ablation::AblationOptions options;
  options.config_path = flags->Get("config");
  options.out_dir = flags->Get("out", "runs/ablation");
  const absl::Status status = ablation::RunAblation(options, std::cout);
  return status.ok() ? 0 : Fail("ablate", status);
}

}  // namespace xhc::cli
