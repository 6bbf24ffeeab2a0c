#ifndef XHC_RUNTIME_TRAIN_OPTIMIZER_H_
#define XHC_RUNTIME_TRAIN_OPTIMIZER_H_

// AdamW with warm-up + cosine learning rate and global gradient-norm clipping (model-spec
// section 6) over a stage's parameters. In a pipeline each stage contributes the sum of
// squares of its own gradients; the caller adds them (in stage order) before the sqrt.

#include <cstdint>

#include "runtime/common/config.h"
#include "runtime/model/params.h"

namespace xhc::train {

// Σ g² over every parameter of `params`, in canonical order, in double.
double GradSumOfSquares(const model::ParamSetT<float>& params);

struct StepStats {
  double lr = 0;
  double grad_norm = 0;
  double clip = 1;  // the factor applied to every gradient
};

// One AdamW update of every parameter for optimizer step `step` (0-based: the number of
// updates already done), given the global gradient norm. Allocates moments on first use.
StepStats ApplyAdamW(const OptimConfig& optim, int64_t total_steps, int64_t step,
                     double global_grad_norm, model::ParamSetT<float>* params);

}  // namespace xhc::train

#endif  // XHC_RUNTIME_TRAIN_OPTIMIZER_H_
