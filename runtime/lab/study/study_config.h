#ifndef XHC_RUNTIME_LAB_STUDY_STUDY_CONFIG_H_
#define XHC_RUNTIME_LAB_STUDY_STUDY_CONFIG_H_

// The study configuration (configs/study*.yaml) and the runs it expands to.
//
//   study:
//     schedules: [gpipe, 1f1b, zb1p, dualpipe, dualpipev]
//     residuals: [vanilla, mhc, xhc]     # N = 1, 4, 16
//     devices: 2          # measured ranks of the equal-device comparison
//     stages: 2           # pipeline stages of the equal-stage comparison (PP)
//     microbatch_factors: [2, 4]   # M = factor * PP, the same M for every schedule
//     steps: 4            # steps per run, of which the first warmup_steps are discarded
//     warmup_steps: 1
//     threads_per_worker: 1        # OMP/OpenBLAS threads per worker process
//     simulate_ranks: [4, 8]       # equal-device comparison simulated with measured costs
//     run_timeout_s: 300
//   job:                  # a job config without `pipeline:`; model.residual is set per run
//     model: {...}
//     train: {batch_size: 4, ...}
//
// Unknown keys are errors, like the job config's.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc::study {

struct StudyConfig {
  std::vector<std::string> schedules = {"gpipe", "1f1b", "zb1p", "dualpipe", "dualpipev"};
  std::vector<std::string> residuals = {"vanilla", "mhc", "xhc"};
  int devices = 2;
  int stages = 2;
  std::vector<int> microbatch_factors = {2, 4};
  int steps = 4;
  int warmup_steps = 1;
  int threads_per_worker = 1;
  std::vector<int> simulate_ranks = {4, 8};
  double run_timeout_s = 300;
  std::string job_yaml;  // the `job:` block re-emitted as YAML
};

// One measured training run.
struct RunSpec {
  std::string id;          // "xhc-1f1b-R2-M4": also the run directory name
  std::string comparison;  // "equal-devices" | "equal-stages"
  std::string schedule;
  std::string residual;
  int num_ranks = 0;
  int num_stages = 0;
  int num_microbatches = 0;
  std::string job_yaml;  // the complete job config of this run
};

absl::StatusOr<StudyConfig> ParseStudyConfig(const std::string& yaml_text);
absl::StatusOr<StudyConfig> LoadStudyConfig(const std::string& path);

// Stages of `schedule` on `num_ranks` ranks (dualpipev: 2R, the others R).
int StagesFor(const std::string& schedule, int num_ranks);

// Every run of the study: the equal-device grid (schedule x residual x M on `devices`
// ranks), then the equal-stage runs that differ from it (a schedule whose stage count on
// `devices` ranks is not `stages`: it runs on the rank count that gives `stages`). Each run's
// job config is validated here, so a bad study fails before the first run starts.
absl::StatusOr<std::vector<RunSpec>> ExpandRuns(const StudyConfig& config);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_STUDY_CONFIG_H_
