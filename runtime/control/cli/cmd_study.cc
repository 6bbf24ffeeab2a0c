// xhc study: the pipeline overlap throughput study (runtime/lab/study/study.h).
#include <iostream>

#include "runtime/control/cli/cli_util.h"
#include "runtime/control/cli/commands.h"
#include "runtime/lab/study/study.h"

namespace xhc::cli {

int RunStudyCommand(const std::vector<std::string>& args) {
  auto flags =
      ParseFlagsOrHelp("study", "--config FILE [--out DIR]", args,
                       {{"config", "study config (YAML, see configs/study.yaml)", false, true},
                        {"out", "output directory (default runs/study)"}});
  if (!flags.ok()) return Fail("study", flags.status());
  study::StudyOptions options;
  options.config_path = flags->Get("config");
  options.out_dir = flags->Get("out", "runs/study");
  const absl::Status status = study::RunStudy(options, std::cout);
  return status.ok() ? 0 : Fail("study", status);
}

}  // namespace xhc::cli
