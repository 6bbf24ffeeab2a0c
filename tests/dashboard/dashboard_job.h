#ifndef XHC_TESTS_DASHBOARD_DASHBOARD_JOB_H_
#define XHC_TESTS_DASHBOARD_DASHBOARD_JOB_H_

// A real `xhc launch --http ADDR` job for the dashboard tests: a tiny 2-worker xhc model that
// evaluates every 3 steps and checkpoints every 4, run long enough to be looked at and then
// killed (the launcher leads its own process group, so its workers go with it).

#include <string>

#include "absl/status/statusor.h"

namespace xhc::testing {

class DashboardJob {
 public:
  // Starts the job in `dir` (config, corpus, run directory and log all there). With
  // `controller_only`, `xhc controller` instead of `xhc launch`: no worker joins it.
  DashboardJob(const std::string& dir, const std::string& http_address,
               bool controller_only = false);
  ~DashboardJob() { Stop(); }

  // The dashboard's port, read from the "dashboard http://HOST:PORT/" line `xhc launch`
  // prints (waits up to 30 s).
  absl::StatusOr<int> Port();
  // Waits up to `timeout_s` until metrics.jsonl holds `step` and a checkpoint line.
  [[nodiscard]] bool WaitForStepAndCheckpoint(int step, double timeout_s);
  void Stop();

  const std::string& run_dir() const { return run_dir_; }
  std::string log() const;
  std::string token() const;

 private:
  std::string dir_, run_dir_, log_;
  int pid_ = -1;
};

// GET http://127.0.0.1:port/path (with `Authorization: Bearer` when token is not empty);
// the status code (-1 when unreachable) and the body.
struct HttpReply {
  int status = -1;
  std::string body;
};
HttpReply HttpGet(int port, const std::string& path, const std::string& token = "");

// Where a test may leave files for a person to look at (bazel's undeclared outputs, else
// TEST_TMPDIR).
std::string OutputsDir();

}  // namespace xhc::testing

#endif  // XHC_TESTS_DASHBOARD_DASHBOARD_JOB_H_
