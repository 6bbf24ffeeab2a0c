#ifndef XHC_RUNTIME_COMMON_CONFIG_H_
#define XHC_RUNTIME_COMMON_CONFIG_H_

// The job configuration: parsed from YAML once, validated once. Every error names the
// offending key ("model.residual.n_active: 5 > n_streams 4"), and unknown keys are errors,
// so a typo never silently falls back to a default.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc {

enum class ResidualType { kVanilla, kHc, kMhc, kXhc, kXhcFlash };

struct ResidualConfig {
  ResidualType type = ResidualType::kXhc;
  int n_streams = 16;  // N (vanilla forces 1; hc and mhc default to 4)
  int n_active = 4;    // k (xhc, xhc_flash; mhc and hc: k = N)
  int n_fixed = 2;     // m (xhc, xhc_flash)
  // MLP sublayers: xhc and xhc_flash default to {4, 8, 12}, mhc to {} (set: the "mHC +
  // convolution" ablation); hc has none (setting it is an error).
  std::vector<int> conv_kernels = {4, 8, 12};
  bool gram_schmidt = true;
  int sinkhorn_iters = 20;
  int window = 2;  // xhc_flash: sublayers sharing one routing decision (2 or 4)
};

struct ModelConfig {
  int vocab_size = 256;
  int d_model = 256;
  int n_layers = 4;
  int n_heads = 4;
  int n_kv_heads = 4;
  int d_ff = 0;  // 0 = 4·C rounded to 64 (resolved by validation)
  int seq_len = 128;
  double rope_theta = 10000.0;
  double norm_eps = 1e-6;
  ResidualConfig residual;

  int head_dim() const { return d_model / n_heads; }
};

struct OptimConfig {
  double lr = 3e-3;
  int warmup_steps = 20;
  double min_lr_ratio = 0.1;  // cosine decays to this fraction of the peak
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double grad_clip = 1.0;
};

struct TrainConfig {
  int steps = 200;
  int batch_size = 8;    // sequences per micro-batch
  int microbatches = 4;  // micro-batches per step (gradients averaged over all)
  uint64_t seed = 1234;
  int eval_every = 50;
  int eval_batches = 4;  // validation micro-batches per evaluation
  int log_every = 1;
};

struct DataConfig {
  std::vector<std::string> train = {"/usr/share/games/fortunes/*"};
  double val_fraction = 0.05;
};

struct PipelineConfig {
  std::string schedule = "1f1b";
  int workers = 1;
  int chunks = 1;  // looped types (interleaved1f1b, interleaved_zb, looped_bfs): stages per rank
  // A PyTorch-format schedule CSV to run instead of a built-in type (runtime/plan): one row
  // per rank; stage placement is read from it. A relative path is relative to the current
  // directory. Excludes `schedule` and `chunks`.
  std::string schedule_csv;
  // Uneven stages (torchtitan style): layers held by the first stage (which also holds the
  // embedding) and by the last (head, LM head, loss); the other layers are split evenly over
  // the middle stages. Unset: that end takes its even share. In [0, model.n_layers]; with
  // one stage they do not apply (it holds everything). The plan checks them against the
  // stage count (runtime/plan).
  std::optional<int> first_stage_layers;
  std::optional<int> last_stage_layers;
  // Data-parallel replicas of the whole pipeline: the job runs data_parallel x workers ranks,
  // replica r taking the contiguous block of train.microbatches / data_parallel micro-batches
  // starting at r * (train.microbatches / data_parallel); the global batch is unchanged.
  int data_parallel = 1;
  // pipeline.link.bandwidth: `xhc launch` runs each worker in its own network namespace with
  // its data-plane egress shaped to this rate ("1gbit"; base/bandwidth.h), the control plane
  // unshaped and the same-host copy off, so one machine has a cluster's compute /
  // communication ratio (runtime/control/launch/shaped_links.h). 0: unshaped (one host's
  // loopback and memory copies). Only `xhc launch` reads it; `--link-bandwidth` overrides.
  int64_t link_bandwidth_bits_per_s = 0;
};

struct CheckpointConfig {
  int every = 100;  // steps between checkpoints (0 = only the final one)
  int keep = 2;
  bool async = true;
};

struct FaultConfig {
  double heartbeat_timeout_s = 5.0;
  double step_timeout_s = 300.0;
  int max_restarts = 3;
};

struct Config {
  ModelConfig model;
  OptimConfig optim;
  TrainConfig train;
  DataConfig data;
  PipelineConfig pipeline;
  CheckpointConfig checkpoint;
  FaultConfig fault;
  std::string source_yaml;  // the text it was parsed from (stored in checkpoints)
};

// Parses and validates YAML text. Errors are kInvalidArgument and name the key.
absl::StatusOr<Config> ParseConfig(const std::string& yaml_text);

// Reads `path` then ParseConfig; a missing file is kNotFound naming the path.
absl::StatusOr<Config> LoadConfigFile(const std::string& path);

// Parses only the `model:` block (what `xhc eval --weights` needs); other blocks are ignored.
absl::StatusOr<ModelConfig> ParseModelOnly(const std::string& yaml_text);

// pipeline.data_parallel (or --data-parallel) against train.microbatches: D >= 1 and D
// divides the micro-batches, so every replica runs the same schedule. kInvalidArgument naming
// pipeline.data_parallel.
absl::Status ValidateDataParallel(int data_parallel, int microbatches);

// Checks cross-field constraints (k <= N, heads divide d_model, ...) and resolves defaults
// that depend on other fields (d_ff, mhc's N). Called by ParseConfig.
absl::Status ValidateModel(ModelConfig& model);

// The residual type as written in YAML ("vanilla", "hc", "mhc", "xhc", "xhc_flash").
std::string ResidualTypeName(ResidualType type);

// Serialises the resolved model config back to a YAML `model:` block (for manifests).
std::string ModelConfigToYaml(const ModelConfig& model);

// A stable 64-bit hash (hex) of the model config: workers refuse a plan from another config.
std::string ModelConfigHash(const ModelConfig& model);

}  // namespace xhc

#endif  // XHC_RUNTIME_COMMON_CONFIG_H_
