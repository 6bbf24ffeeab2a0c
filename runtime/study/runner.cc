#include "runtime/study/runner.h"

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
std::atomic<pid_t> child_group{0};         // 0: no child yet
volatile std::sig_atomic_t pending_signal = 0;  // the first ending signal received

void PassOn(int sig) {
  const pid_t group = child_group.load();
  if (group > 0) kill(-group, sig);
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
  void SetChild(pid_t group) {
    child_group = group;
    if (pending_signal != 0) kill(-group, pending_signal);
  }
  ~PassOnEndingSignals() {
    child_group = 0;
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
  ChildResult result;
  SpawnSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.new_process_group = true;  // a timeout also ends the workers the child started
  spec.output_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (spec.output_fd < 0) {
    result.error = absl::StrCat("open ", log_path, ": ", std::strerror(errno));
    return result;
  }
  PassOnEndingSignals pass_on;
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(spec.output_fd);
  if (!pid.ok()) {
    result.error = std::string(pid.status().message());
    return result;
  }
  pass_on.SetChild(*pid);
  const WaitResult waited = WaitWithTimeout(*pid, timeout_s, /*kill_group=*/true);
  result.exit_code = waited.exit_code;
  result.timed_out = waited.timed_out;
  result.wall_s = waited.wall_s;
  return result;
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
