#ifndef XHC_BASE_SUBPROCESS_H_
#define XHC_BASE_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc {

// The one fork/exec helper of the project (launcher workers, study runs, test processes).
// Everything the child needs (argv, the whole environment) is built before fork, so the
// child runs only async-signal-safe calls until execve: safe in a multi-threaded parent.
struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is the program's path (no PATH search)
  // Set in the child's environment, replacing any value the parent has; the rest of the
  // parent's environment is inherited.
  std::vector<std::pair<std::string, std::string>> env;
  int output_fd = -1;              // >= 0: the child's stdout and stderr go here
  bool new_process_group = false;  // the child leads its own group (kill(-pid) reaps all)
  // >= 0: the child enters this network namespace (setns, between fork and exec) before it
  // runs the program, so /proc/self/exe stays the program's own (base/netns.h). A failed
  // setns ends the child with code 126 before exec, saying so on its output.
  int netns_fd = -1;
};

// Starts the child; returns its pid.
absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec);

// Exit code of a waitpid status: the code, or 128 + signal for a killed child (as a shell).
int ExitCodeOf(int wait_status);

struct WaitResult {
  int exit_code = -1;
  bool timed_out = false;  // the child was SIGKILLed after the timeout
  double wall_s = 0;
};

// Waits for `pid` up to `timeout_s` (polling, so signals and other threads go on), then
// SIGKILLs it (its whole group when `kill_group`) and reaps it.
WaitResult WaitWithTimeout(pid_t pid, double timeout_s, bool kill_group = false);

// The same for several children running at once: each is waited for (and killed after)
// the same limit from this call, and its wall_s is the time until it was reaped.
std::vector<WaitResult> WaitAllWithTimeout(const std::vector<pid_t>& pids, double timeout_s,
                                           bool kill_group = false);

}  // namespace xhc

#endif  // XHC_BASE_SUBPROCESS_H_
