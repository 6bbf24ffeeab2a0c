#ifndef XHC_RUNTIME_STUDY_RUNNER_H_
#define XHC_RUNTIME_STUDY_RUNNER_H_

// Runs one child process (the study's `xhc launch`) with its output in a log file, a wall
// clock limit and extra environment; a failing child is a result, never an abort.

#include <string>
#include <utility>
#include <vector>

namespace xhc::study {

struct ChildResult {
  int exit_code = -1;      // the child's exit status; 128 + signal when killed
  bool timed_out = false;  // killed (with its process group) after the limit
  double wall_s = 0;
  std::string error;       // fork/exec/open failure, empty otherwise
};

// Runs argv[0] with argv in its own process group (so a timeout also ends the workers it
// started), stdout and stderr appended to log_path, `env` added to the environment. A
// SIGINT, SIGTERM or SIGHUP that reaches this process meanwhile is passed on to the child's
// group, and once the child has ended this process takes it as it would have otherwise
// (by default: it ends, after its child).
ChildResult RunChild(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const std::string& log_path, double timeout_s);

// The last `num_lines` lines of a text file ("" when it cannot be read).
std::string TailLines(const std::string& path, int num_lines);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_STUDY_RUNNER_H_
