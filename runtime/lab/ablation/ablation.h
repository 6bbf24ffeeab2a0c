#ifndef XHC_RUNTIME_LAB_ABLATION_ABLATION_H_
#define XHC_RUNTIME_LAB_ABLATION_ABLATION_H_

// `xhc ablate`: trains every variant × seed of an ablation config as a child `xhc train`
// (parallel_runs at a time), runs `xhc eval --diagnostics` on each final checkpoint, and
// writes
//   OUT/results/<run>.json   one per finished run (atomic + fsync): curve, FLOPs, diagnostics
//   OUT/runs/<run>/{config.yaml, log.txt, run/, diagnostics.json}
//   OUT/report.md, OUT/charts/*.{png,svg,pdf}  (rewritten after every run: partial until the end)
// A failed run is recorded and the study goes on. Resumable: a run with an ok result file is
// skipped; any other run starts again from scratch (a child left running by a killed study
// is ended first).

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/lab/ablation/ablation_config.h"
#include "runtime/lab/ablation/diagnostics.h"
#include "runtime/lab/ablation/flops.h"

namespace xhc::ablation {

struct CurvePoint {
  int step = 0;
  double val_loss = 0;
  double train_s = 0;  // training seconds up to this step (evaluation excluded)
};

struct RunResult {
  std::string id, variant;
  int seed = 0;
  bool ok = false;
  std::string failure;
  int steps = 0;
  double tokens_per_step = 0;
  FlopCount flops;          // per token
  double wall_s = 0;        // the child's wall time (training + evaluations)
  double train_s = 0;       // sum of step times
  double tokens_per_s = 0;  // training tokens / train_s
  std::vector<CurvePoint> curve;
  bool has_diagnostics = false;
  Diagnostics diagnostics;
  std::string diagnostics_failure;  // the diagnostics child's failure (the run stays ok)

  double final_val_loss() const { return curve.empty() ? 0 : curve.back().val_loss; }
};

std::string RunResultJson(const RunResult& r);
absl::StatusOr<RunResult> ParseRunResultJson(const std::string& text);

// Reads an `xhc train` metrics.jsonl into the curve and timing fields of `r`.
absl::Status ParseTrainMetrics(const std::string& jsonl, RunResult* r);

// Validation loss of the curve at x, linearly interpolated between its points, where x is a
// step count (by = kSteps), FLOPs spent (kFlops: step × tokens_per_step × training FLOPs per
// token) or training seconds (kSeconds). NaN outside [first point, last point].
enum class Axis { kSteps, kFlops, kSeconds };
double LossAt(const RunResult& r, Axis axis, double x);
double AxisValue(const RunResult& r, const CurvePoint& p, Axis axis);

struct AblationOutcome {
  AblationConfig config;
  std::vector<RunResult> runs;  // config order (variant-major)
  double wall_s = 0;            // this invocation's wall time
  int skipped = 0;              // runs taken from an earlier invocation's results
  int pending = 0;              // runs not finished yet (the report is rewritten after each)
};

struct AblationOptions {
  std::string config_path;
  std::string out_dir = "runs/ablation";
  std::string xhc_binary = "/proc/self/exe";
};

absl::Status RunAblation(const AblationOptions& options, std::ostream& progress);

// report.md (report.cc) and the charts (writes OUT/charts).
std::string RenderAblationReport(const AblationOutcome& outcome);
absl::Status WriteAblationCharts(const AblationOutcome& outcome, const std::string& out_dir);

}  // namespace xhc::ablation

#endif  // XHC_RUNTIME_LAB_ABLATION_ABLATION_H_
