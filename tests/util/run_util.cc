#include "tests/util/run_util.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/subprocess.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/step_names.h"

namespace xhc::testing {
namespace fs = std::filesystem;

std::string XhcBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir && workspace) return absl::StrCat(srcdir, "/", workspace, "/xhc");
  return "./xhc";
}

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string CopyRunAsOfStep(const std::string& from, const std::string& to, int step) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  for (const fs::directory_entry& e : fs::directory_iterator(to + "/checkpoints")) {
    if (StepOfDirName(e.path().filename().string()) > step) fs::remove_all(e.path());
  }
  WriteText(to + "/checkpoints/LATEST", StepDirName(step) + "\n");
  fs::remove(to + "/metrics.jsonl");
  return to;
}

int RunCommand(const std::string& command, const std::string& log) {
  const std::string full = absl::StrCat(command, " >>", log, " 2>&1");
  const int rc = std::system(full.c_str());
  return ExitCodeOf(rc);
}

int StartBackground(const std::string& command, const std::string& log) {
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c", absl::StrCat("exec ", command, " >>", log, " 2>&1")};
  absl::StatusOr<pid_t> pid = Spawn(spec);
  return pid.ok() ? *pid : -1;
}

int WaitForExit(int pid, double timeout_s) {
  const WaitResult r = WaitWithTimeout(pid, timeout_s);
  return r.timed_out ? -1 : r.exit_code;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitForText(const std::string& path, const std::string& text, double timeout_s) {
  for (int i = 0; i < timeout_s * 100; ++i) {
    if (ReadText(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<std::string> MicrobatchLosses(const std::string& run_dir) {
  std::vector<std::string> out;
  std::istringstream in(ReadText(run_dir + "/metrics.jsonl"));
  std::string line;
  const std::string key = "\"microbatch_losses\": [";
  while (std::getline(in, line)) {
    const size_t at = line.find(key);
    if (at == std::string::npos) continue;
    const size_t end = line.find(']', at);
    out.push_back(line.substr(at + key.size(), end - at - key.size()));
  }
  return out;
}

std::vector<std::string> CommittedMicrobatchLosses(const std::string& run_dir) {
  std::map<int, std::string> by_step;
  std::istringstream in(ReadText(run_dir + "/metrics.jsonl"));
  std::string line;
  const std::string step_key = "\"step\": ", loss_key = "\"microbatch_losses\": [";
  while (std::getline(in, line)) {
    const size_t at = line.find(loss_key), s = line.find(step_key);
    if (at == std::string::npos || s == std::string::npos) continue;
    const int step = std::atoi(line.c_str() + s + step_key.size());
    by_step[step] = line.substr(at + loss_key.size(), line.find(']', at) - at - loss_key.size());
  }
  std::vector<std::string> out;
  for (const auto& [step, losses] : by_step) out.push_back(losses);
  return out;
}

std::map<std::string, Tensor> CheckpointTensors(const std::string& run_dir, int step) {
  absl::StatusOr<LoadedCheckpoint> c =
      LoadCheckpoint(absl::StrCat(run_dir, "/checkpoints/", StepDirName(step)));
  return c.ok() ? c->tensors : std::map<std::string, Tensor>{};
}

std::string CheckpointFingerprint(const std::string& run_dir, int step) {
  std::string all;
  for (const auto& [name, t] : CheckpointTensors(run_dir, step)) {
    all += name;
    all.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  }
  return all;
}

double RelativeDiff(const Tensor& a, const Tensor& b) {
  if (a.values.size() != b.values.size()) return INFINITY;
  double diff = 0, scale = 1e-3;
  for (size_t i = 0; i < a.values.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(a.values[i] - b.values[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(a.values[i])));
  }
  return diff / scale;
}

}  // namespace xhc::testing
