#ifndef XHC_RUNTIME_TRAIN_TRAINER_H_
#define XHC_RUNTIME_TRAIN_TRAINER_H_

// Single-process training (`xhc train`): the whole model as one stage, micro-batches run
// F → I → W in order, gradients averaged over the step's micro-batches, AdamW, periodic
// validation and checkpoints. The run directory holds config.yaml, metrics.jsonl and
// checkpoints/ (format: runtime/checkpoint/FORMAT.md).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/checkpoint/file_system.h"
#include "runtime/common/config.h"
#include "runtime/data/corpus.h"
#include "runtime/model/params.h"
#include "runtime/model/stage.h"

namespace xhc::train {

struct TrainOptions {
  int64_t steps = -1;       // overrides train.steps when >= 0; 0 writes the seeded
                            // initial weights as checkpoint 0 and trains nothing
  std::string out_dir;      // run directory (created); required
  bool resume = false;      // continue from out_dir/checkpoints (LATEST, else older)
  bool quiet = false;       // no per-step progress lines (tests)
  int64_t stop_after = -1;  // stop (after checkpointing) once this step is done; the LR
                            // schedule still spans `steps` (simulates an interruption)
  // Where checkpoints are written; null: the real filesystem (tests pass a fault injector).
  FileSystem* checkpoint_files = nullptr;
};

struct TrainResult {
  int64_t start_step = 0;  // first step run (after a resume: the checkpoint's)
  int64_t end_step = 0;
  std::vector<double> step_losses;  // mean loss of every step run
  double final_val_loss = 0;
  double tokens_per_s = 0;  // over the steps run, excluding evaluation
};

absl::StatusOr<TrainResult> RunTraining(const Config& config, const TrainOptions& options);

// Mean validation loss over `eval_batches` fixed validation micro-batches.
absl::StatusOr<double> ValidationLoss(const Config& config, const Corpus& corpus,
                                      model::StageModel* model);

}  // namespace xhc::train

#endif  // XHC_RUNTIME_TRAIN_TRAINER_H_
