#ifndef XHC_RUNTIME_CONTROL_CLI_COMMANDS_H_
#define XHC_RUNTIME_CONTROL_CLI_COMMANDS_H_

// The subcommands of the single `xhc` binary. Each takes its arguments (without the program
// and subcommand names) and returns the process exit code; errors are printed to stderr.

#include <string>
#include <vector>

namespace xhc::cli {

int RunTrain(const std::vector<std::string>& args);
int RunEval(const std::vector<std::string>& args);
int RunSample(const std::vector<std::string>& args);
int RunCkpt(const std::vector<std::string>& args);
int RunSchedule(const std::vector<std::string>& args);
int RunLaunchCommand(const std::vector<std::string>& args);
int RunWorkerCommand(const std::vector<std::string>& args);
int RunControllerCommand(const std::vector<std::string>& args);
int RunStatusCommand(const std::vector<std::string>& args);
int RunStudyCommand(const std::vector<std::string>& args);
int RunAblateCommand(const std::vector<std::string>& args);

}  // namespace xhc::cli

#endif  // XHC_RUNTIME_CONTROL_CLI_COMMANDS_H_
