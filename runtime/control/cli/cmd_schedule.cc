// xhc schedule ...: the scheduler package's command line, plus --config FILE, which the
// scheduler (no runtime dependency) cannot read: it becomes --activation-bytes, the
// [batch_size x seq_len, n_streams, d_model] float32 state one stage keeps per micro-batch
// for backward, so peak activation memory is reported in bytes for that model.
#include <iostream>

#include "absl/strings/str_cat.h"
#include "runtime/common/config.h"
#include "runtime/control/cli/commands.h"
#include "scheduler/schedule_cli.h"
#include "scheduler/simulator.h"

namespace xhc::cli {

int RunSchedule(const std::vector<std::string>& args) {
  std::vector<std::string> forwarded;
  for (size_t k = 0; k < args.size(); ++k) {
    std::string path;
    if (args[k] == "--config" && k + 1 < args.size()) {
      path = args[++k];
    } else if (args[k].rfind("--config=", 0) == 0) {
      path = args[k].substr(9);
    } else {
      forwarded.push_back(args[k]);
      continue;
    }
    absl::StatusOr<Config> config = LoadConfigFile(path);
    if (!config.ok()) {
      std::cerr << "xhc schedule: --config: " << config.status().message() << "\n";
      return 2;
    }
    const ModelConfig& m = config->model;
    const int64_t tokens = static_cast<int64_t>(config->train.batch_size) * m.seq_len;
    forwarded.push_back("--activation-bytes");
    forwarded.push_back(absl::StrCat(static_cast<int64_t>(
        scheduler::ActivationBytes(tokens, m.residual.n_streams, m.d_model, sizeof(float)))));
  }
  return scheduler::RunScheduleCommand(forwarded, std::cout, std::cerr);
}

}  // namespace xhc::cli
