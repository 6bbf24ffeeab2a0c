#include "runtime/study/runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xhc::study {
namespace {

// In the forked child: only async-signal-safe calls until exec.
[[noreturn]] void ExecChild(const std::vector<char*>& argv, int log_fd) {
  setpgid(0, 0);
  dup2(log_fd, STDOUT_FILENO);
  dup2(log_fd, STDERR_FILENO);
  close(log_fd);
  execv(argv[0], argv.data());
  _exit(127);
}

int WaitStatusToCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

ChildResult RunChild(const std::vector<std::string>& argv,
                     const std::vector<std::pair<std::string, std::string>>& env,
                     const std::string& log_path, double timeout_s) {
  ChildResult result;
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    result.error = absl::StrCat("open ", log_path, ": ", std::strerror(errno));
    return result;
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The environment is set in the parent before fork (setenv is not async-signal-safe) and
  // restored afterwards; the study runs one child at a time.
  std::vector<std::pair<std::string, std::string>> saved;
  for (const auto& [key, value] : env) {
    const char* old = std::getenv(key.c_str());
    saved.emplace_back(key, old == nullptr ? std::string("\x01") : std::string(old));
    setenv(key.c_str(), value.c_str(), 1);
  }
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) ExecChild(args, log_fd);
  for (const auto& [key, old] : saved) {
    if (old == "\x01") unsetenv(key.c_str()); else setenv(key.c_str(), old.c_str(), 1);
  }
  close(log_fd);
  if (pid < 0) {
    result.error = absl::StrCat("fork: ", std::strerror(errno));
    return result;
  }
  setpgid(pid, pid);  // also from the parent, so the kill below cannot race the child's call
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      result.error = absl::StrCat("waitpid: ", std::strerror(errno));
      return result;
    }
    if (elapsed() > timeout_s && !result.timed_out) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Workers outlive a killed launcher unless their group goes too.
  if (result.timed_out) kill(-pid, SIGKILL);
  result.exit_code = WaitStatusToCode(status);
  result.wall_s = elapsed();
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
