#ifndef XHC_RUNTIME_LAB_STUDY_RUNNER_H_
#define XHC_RUNTIME_LAB_STUDY_RUNNER_H_

// Runs a child process (the study's `xhc launch`), or several at once, with its output in a
// log file, a wall clock limit and extra environment; a failing child is a result, never an
// abort.

#include <string>
#include <utility>
#include <vector>

namespace xhc::study {

struct ChildResult {
  int exit_code = -1;      // the child's exit status; 128 + signal when killed
  bool timed_out = false;  // killed (with its process group) after the limit
  double wall_s = 0;
  std::string error;  // fork/exec/open failure, empty otherwise
};

// Runs argv[0] with argv in its own process group (so a timeout also ends the workers it
// started), stdout and stderr appended to log_path, `env` added to the environment. A
// SIGINT, SIGTERM or SIGHUP that reaches this process meanwhile is passed on to the child's
// group, and once the child has ended this process takes it as it would have otherwise
// (by default: it ends, after its child).
ChildResult RunChild(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const std::string& log_path, double timeout_s);

// One child of RunChildren: what RunChild takes.
struct ChildCommand {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;
  std::string log_path;
};

// Runs up to 8 children at once, each as RunChild runs one (its own group, its log, the
// ending signals passed on to every group), and waits for all of them: each has `timeout_s`
// from the start and its own result (in `children`'s order). More than 8: every result
// carries an error and nothing is started.
std::vector<ChildResult> RunChildren(const std::vector<ChildCommand>& children, double timeout_s);

// The last `num_lines` lines of a text file ("" when it cannot be read).
std::string TailLines(const std::string& path, int num_lines);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_RUNNER_H_
