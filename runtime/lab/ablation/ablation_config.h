#ifndef XHC_RUNTIME_LAB_ABLATION_ABLATION_CONFIG_H_
#define XHC_RUNTIME_LAB_ABLATION_ABLATION_CONFIG_H_

// The ablation study's configuration (configs/ablation*.yaml) and the runs it expands to.
//
//   ablation:
//     variants: [vanilla, hc, mhc4, mhc4_conv, mhc16, xhc, xhc_flash2, xhc_flash4]
//     seeds: [1, 2, 3]          # train.seed of each run: initialisation and data order
//     steps: 300                # every run trains exactly this many steps
//     eval_every: 25            # validation points of the learning curves
//     parallel_runs: 2          # runs at once (each a child `xhc train`)
//     threads_per_run: 1        # OMP / OpenBLAS threads of each run
//     run_timeout_s: 1200
//     diagnostics_batch: 4      # validation rows `xhc eval --diagnostics` reads per run
//   job:                        # a job config; model.residual is set per variant
//     model: {...}
//     optim: {...}
//     train: {batch_size: 8, microbatches: 1, eval_batches: 8}
//     data: {train: [/usr/share/games/fortunes/*]}
//
// Every variant of a seed sees the same batches in the same order and is validated on the
// same held-out windows (both are functions of the seed only: runtime/data/sampler.h), with
// the same optimizer recipe. Unknown keys and variant names are errors naming the key.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc::ablation {

struct AblationConfig {
  std::vector<std::string> variants = {"vanilla", "hc",  "mhc4",       "mhc4_conv",
                                       "mhc16",   "xhc", "xhc_flash2", "xhc_flash4"};
  std::vector<int> seeds = {1, 2, 3};
  int steps = 300;
  int eval_every = 25;
  int parallel_runs = 2;
  int threads_per_run = 1;
  double run_timeout_s = 1200;
  int diagnostics_batch = 4;
  std::string job_yaml;  // the `job:` block re-emitted as YAML
};

struct AblationRun {
  std::string id;  // "xhc-s1": the run directory and result file name
  std::string variant;
  int seed = 0;
  std::string job_yaml;  // the complete job config of this run
};

// The residual block of a variant name, as YAML ("{type: mhc, n_streams: 4}"); kNotFound
// for an unknown name.
absl::StatusOr<std::string> VariantResidualYaml(const std::string& variant);
// Every known variant name, in report order.
const std::vector<std::string>& KnownVariants();

absl::StatusOr<AblationConfig> ParseAblationConfig(const std::string& yaml_text);
absl::StatusOr<AblationConfig> LoadAblationConfig(const std::string& path);

// variant × seed, variant-major; every job config validated here.
absl::StatusOr<std::vector<AblationRun>> ExpandAblationRuns(const AblationConfig& config);

}  // namespace xhc::ablation

#endif  // XHC_RUNTIME_LAB_ABLATION_ABLATION_CONFIG_H_
