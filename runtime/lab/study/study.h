#ifndef XHC_RUNTIME_LAB_STUDY_STUDY_H_
#define XHC_RUNTIME_LAB_STUDY_STUDY_H_

// `xhc study`: runs every RunSpec of a study config as a child `xhc launch`, measures it,
// puts the analytic and simulated bubbles beside the measured ones, and writes
//   OUT/report.md, OUT/results.json, OUT/charts/*.{svg,png}, OUT/traces/<run>.trace.json,
//   OUT/runs/<run>/{config.yaml, log.txt, run/...}.
// A failed run is recorded (exit code, last log lines) and the study goes on.

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/lab/study/bubbles.h"
#include "runtime/lab/study/measure.h"
#include "runtime/lab/study/study_config.h"

namespace xhc::study {

struct RunResult {
  RunSpec spec;
  bool ok = false;
  std::string failure;  // why the run has no numbers: exit code, timeout, parse error + log
  double wall_s = 0;
  StepMetrics metrics;
  TraceMeasurement trace;
  StageCosts costs;  // mean per-stage F, I, W (ms)
  double payload_bytes = 0;
  ModelBubbles model;  // analytic + simulated with the measured costs
};

// The equal-device comparison at a rank count that was not measured: every schedule
// simulated with the per-stage costs measured for it on `devices` ranks.
struct ScaledResult {
  std::string residual, schedule;
  int num_ranks = 0, num_microbatches = 0;
  double makespan_ms = 0;
  double tokens_per_s = 0;  // tokens per step / makespan
  double bubble_mean = 0, analytic_mean = -1;
};

struct StudyOutcome {
  StudyConfig config;
  std::vector<RunResult> runs;
  std::vector<ScaledResult> scaled;
  double wall_s = 0;
  int tokens_per_microbatch = 0;
};

struct StudyOptions {
  std::string config_path;
  std::string out_dir = "runs/study";
  std::string xhc_binary = "/proc/self/exe";
};

absl::Status RunStudy(const StudyOptions& options, std::ostream& progress);

// The report's markdown (report.cc) and charts (writes OUT/charts).
std::string RenderReport(const StudyOutcome& outcome);
absl::Status WriteCharts(const StudyOutcome& outcome, const std::string& out_dir);

// Helpers shared by report and charts.
double Mean(const std::vector<double>& v);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_STUDY_H_
