#include "runtime/lab/study/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/subprocess.h"

namespace xhc::study {
namespace {

// A child leads its own process group (so that a timeout ends the workers it started), which
// also keeps the signals that end its parent from reaching it: a Ctrl-C (the terminal signals
// its foreground group, not the child's) or a SIGTERM to the study would leave the child's
// job running on. While a child runs, those signals are passed on to its group; once the
// child is gone the parent takes the signal itself, as it would have without a child.
constexpr int kEndingSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kMaxChildren = 8;                 // RunChildren's limit
std::atomic<pid_t> child_groups[kMaxChildren];  // 0: no child in that slot
volatile std::sig_atomic_t pending_signal = 0;  // the first ending signal received

void PassOn(int sig) {
  for (const std::atomic<pid_t>& slot : child_groups) {
    const pid_t group = slot.load();
    if (group > 0) kill(-group, sig);
  }
  if (pending_signal == 0) pending_signal = sig;
}

class PassOnEndingSignals {
 public:
  PassOnEndingSignals() {
    struct sigaction sa = {};
    sa.sa_handler = PassOn;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < std::size(kEndingSignals); ++i) {
      sigaction(kEndingSignals[i], &sa, &saved_[i]);
    }
  }
  // A signal that came before the child had a group is passed on now.
  void SetChild(int slot, pid_t group) {
    child_groups[slot] = group;
    if (pending_signal != 0) kill(-group, pending_signal);
  }
  ~PassOnEndingSignals() {
    for (std::atomic<pid_t>& slot : child_groups) slot = 0;
    for (size_t i = 0; i < std::size(kEndingSignals); ++i) {
      sigaction(kEndingSignals[i], &saved_[i], nullptr);
    }
    if (const int sig = pending_signal; sig != 0) {
      pending_signal = 0;
      raise(sig);  // under the disposition the process had before (by default: it ends)
    }
  }

 private:
  struct sigaction saved_[std::size(kEndingSignals)];
};

}  // namespace

ChildResult RunChild(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const std::string& log_path, double timeout_s) {
  return RunChildren({ChildCommand{argv, env, log_path}}, timeout_s)[0];
}

std::vector<ChildResult> RunChildren(const std::vector<ChildCommand>& children, double timeout_s) {
  std::vector<ChildResult> results(children.size());
  if (children.size() > static_cast<size_t>(kMaxChildren)) {
    for (ChildResult& r : results) {
      r.error = absl::StrCat("RunChildren: ", children.size(), " children, at most ", kMaxChildren,
                             " at once");
    }
    return results;
  }
  PassOnEndingSignals pass_on;
  std::vector<pid_t> pids;
  std::vector<size_t> started;  // index into children of each pid
  for (size_t i = 0; i < children.size(); ++i) {
    SpawnSpec spec;
    spec.argv = children[i].argv;
    spec.env = children[i].env;
    spec.new_process_group = true;  // a timeout also ends the workers the child started
    spec.output_fd =
        open(children[i].log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (spec.output_fd < 0) {
      results[i].error = absl::StrCat("open ", children[i].log_path, ": ", std::strerror(errno));
      continue;
    }
    absl::StatusOr<pid_t> pid = Spawn(spec);
    close(spec.output_fd);
    if (!pid.ok()) {
      results[i].error = std::string(pid.status().message());
      continue;
    }
    pass_on.SetChild(static_cast<int>(pids.size()), *pid);
    pids.push_back(*pid);
    started.push_back(i);
  }
  const std::vector<WaitResult> waited = WaitAllWithTimeout(pids, timeout_s, /*kill_group=*/true);
  for (size_t p = 0; p < pids.size(); ++p) {
    ChildResult& r = results[started[p]];
    r.exit_code = waited[p].exit_code;
    r.timed_out = waited[p].timed_out;
    r.wall_s = waited[p].wall_s;
  }
  return results;
}

std::string TailLines(const std::string& path, int num_lines) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > num_lines) lines.pop_front();
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace xhc::study
