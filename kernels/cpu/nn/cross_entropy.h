#ifndef XHC_KERNELS_CPU_NN_CROSS_ENTROPY_H_
#define XHC_KERNELS_CPU_NN_CROSS_ENTROPY_H_

#include <cstdint>

#include "absl/status/status.h"

// Cross-entropy over the vocabulary: loss = mean over rows of −log softmax(logits)[target]
// (model-spec §2). Buffers caller-allocated, no aliasing; targets must lie in [0, V).
// Parallel over rows; the loss is summed in double in row order after the parallel part, so
// it is bit-identical for any thread count.

namespace xhc::nn {

// logits (R,V), targets (R) -> *loss is the mean loss; lse (R) is saved for backward.
absl::Status CrossEntropyForward(float* loss, float* lse, const float* logits,
                                 const int32_t* targets, int R, int V);

// dlogits (R,V), overwritten with scale · (softmax − onehot) / R, i.e. scale times the
// gradient of the mean loss. Pass scale = 1/num_micro_batches to average over a step.
absl::Status CrossEntropyBackward(float* dlogits, const float* logits, const float* lse,
                                  const int32_t* targets, int R, int V, float scale);

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_CROSS_ENTROPY_H_
