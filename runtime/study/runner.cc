#include "runtime/study/runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/subprocess.h"

namespace xhc::study {

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
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(spec.output_fd);
  if (!pid.ok()) {
    result.error = std::string(pid.status().message());
    return result;
  }
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
