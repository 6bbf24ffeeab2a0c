#include "tests/dashboard/dashboard_job.h"

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/subprocess.h"
#include "tests/util/run_util.h"

namespace xhc::testing {

DashboardJob::DashboardJob(const std::string& dir, const std::string& http_address,
                           bool controller_only)
    : dir_(dir), run_dir_(dir + "/run"), log_(dir + "/launch.log") {
  std::string text;
  for (int i = 0; i < 300; ++i) absl::StrAppend(&text, "Dashboards show jobs live; ", i, ".\n");
  WriteText(dir + "/corpus.txt", text);
  const std::string config = dir + "/config.yaml";
  // Steps of ~10 ms: 100000 of them outlast any test, which kills the job when done.
  WriteText(
      config,
      absl::StrCat(
          "model: {d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,\n"
          "        residual: {type: xhc, n_streams: 4, n_active: 2, n_fixed: 1}}\n"
          "train: {steps: 100000, batch_size: 1, microbatches: 2, seed: 5, eval_every: 3,\n"
          "        eval_batches: 1}\n"
          "data: {train: ",
          dir,
          "/corpus.txt}\n"
          "pipeline: {schedule: 1f1b, workers: 2}\n"
          "checkpoint: {every: 4, keep: 2}\n"
          "fault: {heartbeat_timeout: 2, step_timeout: 20, max_restarts: 3}\n"));
  SpawnSpec spec;
  spec.argv = {
      "/bin/sh", "-c",
      absl::StrCat("exec ", XhcBinary(),
                   controller_only ? " controller --listen 127.0.0.1:0" : " launch", " --config ",
                   config, " --out ", run_dir_, " --http ", http_address, " >>", log_, " 2>&1")};
  spec.new_process_group = true;
  absl::StatusOr<pid_t> pid = Spawn(spec);
  pid_ = pid.ok() ? *pid : -1;
}

absl::StatusOr<int> DashboardJob::Port() {
  const std::regex line("dashboard http://[^ ]*:([0-9]+)/");
  for (int i = 0; i < 300; ++i) {
    std::smatch m;
    const std::string text = ReadText(log_);
    if (std::regex_search(text, m, line)) return std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(absl::StrCat("no dashboard line in ", log_, ":\n", log()));
}

bool DashboardJob::WaitForStepAndCheckpoint(int step, double timeout_s) {
  const std::string needle = absl::StrCat("\"step\": ", step, ",");
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(timeout_s * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string m = ReadText(run_dir_ + "/metrics.jsonl");
    if (m.find(needle) != std::string::npos && m.find("checkpoint_step") != std::string::npos) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void DashboardJob::Stop() {
  if (pid_ <= 0) return;
  kill(-pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string DashboardJob::log() const { return ReadText(log_); }
std::string DashboardJob::token() const { return ReadText(run_dir_ + "/.job-token"); }

HttpReply HttpGet(int port, const std::string& path, const std::string& token) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.insert({"Authorization", "Bearer " + token});
  httplib::Result r = client.Get(path, headers);
  if (!r) return {};
  return {r->status, r->body};
}

std::string OutputsDir() {
  if (const char* d = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR"); d != nullptr) return d;
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp ? tmp : "/tmp";
}

}  // namespace xhc::testing
