#include "tests/fault/fault_job.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace fs = std::filesystem;

std::string FaultJobConfig(const std::string& dir, const std::string& schedule, int steps,
                           int max_restarts) {
  const std::string corpus = dir + "/corpus.txt";
  if (!fs::exists(corpus)) {
    std::string text;
    for (int i = 0; i < 400; ++i) absl::StrAppend(&text, "faults happen; jobs go on ", i, ".\n");
    WriteText(corpus, text);
  }
  const std::string path = absl::StrCat(dir, "/", schedule, ".yaml");
  WriteText(
      path,
      absl::StrCat(
          "model: {d_model: 16, n_layers: 4, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 16,\n"
          "        residual: {type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: "
          "[2]}}\n"
          "optim: {lr: 0.01, warmup_steps: 3}\n"
          "train: {steps: ",
          steps,
          ", batch_size: 2, microbatches: 4, seed: 3, eval_every: 0}\n"
          "data: {train: ",
          corpus,
          "}\n"
          "pipeline: {schedule: ",
          schedule,
          ", workers: 2}\n"
          "checkpoint: {every: 10, keep: 3}\n"
          "fault: {heartbeat_timeout: 1.5, step_timeout: 20, max_restarts: ",
          max_restarts, "}\n"));
  return path;
}

std::vector<int> WorkerPids(const std::string& run) {
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadText(entry.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(" worker ") != std::string::npos &&
        cmdline.find(run + "/.job-token") != std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

bool WaitForStep(const std::string& run, int step) {
  const std::string needle = absl::StrCat("\"step\": ", step, ",");
  for (int i = 0; i < 6000; ++i) {
    if (ReadText(run + "/metrics.jsonl").find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::vector<int> WaitForWorkers(const std::string& run) {
  for (int i = 0; i < 1000; ++i) {
    std::vector<int> pids = WorkerPids(run);
    if (!pids.empty()) return pids;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return {};
}

}  // namespace xhc::testing
