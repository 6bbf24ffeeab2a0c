#include "base/subprocess.h"

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace xhc {
namespace {

// The parent's environment with `overrides` replacing (or adding) their keys.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || k == key;
    if (!replaced) out.push_back(entry);
  }
  for (const auto& [k, v] : overrides) out.push_back(absl::StrCat(k, "=", v));
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

absl::StatusOr<pid_t> Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return absl::InvalidArgumentError("Spawn: empty argv");
  std::vector<std::string> args = spec.argv;
  std::vector<std::string> env = ChildEnvironment(spec.env);
  std::vector<char*> argv = Pointers(args);
  std::vector<char*> envp = Pointers(env);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  if (pid == 0) {
    // Only async-signal-safe calls from here to execve.
    if (spec.new_process_group) setpgid(0, 0);
    if (spec.output_fd >= 0) {
      dup2(spec.output_fd, STDOUT_FILENO);
      dup2(spec.output_fd, STDERR_FILENO);
      if (spec.output_fd > STDERR_FILENO) close(spec.output_fd);
    }
    if (spec.netns_fd >= 0 && setns(spec.netns_fd, CLONE_NEWNET) != 0) {
      const char msg[] = "setns(CLONE_NEWNET) failed before exec\n";
      (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
      _exit(126);
    }
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "exec failed\n";
    (void)!write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(127);
  }
  // Also from the parent, so a kill(-pid) right after cannot race the child's own call.
  if (spec.new_process_group) setpgid(pid, pid);
  return pid;
}

int ExitCodeOf(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return -1;
}

std::vector<WaitResult> WaitAllWithTimeout(const std::vector<pid_t>& pids, double timeout_s,
                                           bool kill_group) {
  std::vector<WaitResult> results(pids.size());
  std::vector<bool> done(pids.size(), false);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      WaitResult& r = results[i];
      int status = 0;
      const pid_t got = waitpid(pids[i], &status, WNOHANG);
      if (got == pids[i] || (got < 0 && errno != EINTR)) {
        // got < 0: not our child (or already reaped): the exit code stays -1.
        // A killed group leader's children outlive it unless the group goes too.
        if (got == pids[i] && r.timed_out && kill_group) kill(-pids[i], SIGKILL);
        if (got == pids[i]) r.exit_code = ExitCodeOf(status);
        r.wall_s = elapsed();
        done[i] = true;
        --left;
        continue;
      }
      if (!r.timed_out && elapsed() > timeout_s) {
        r.timed_out = true;
        kill(kill_group ? -pids[i] : pids[i], SIGKILL);
      }
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return results;
}

WaitResult WaitWithTimeout(pid_t pid, double timeout_s, bool kill_group) {
  return WaitAllWithTimeout({pid}, timeout_s, kill_group)[0];
}

}  // namespace xhc
