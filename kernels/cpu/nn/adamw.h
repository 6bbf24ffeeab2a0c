#ifndef XHC_KERNELS_CPU_NN_ADAMW_H_
#define XHC_KERNELS_CPU_NN_ADAMW_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"

// AdamW, its learning-rate schedule and the global gradient norm (model-spec §6).

namespace xhc::nn {

struct AdamWOptions {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;
};

// One AdamW step on a flat tensor of n elements, in place on param, m (exp_avg) and v
// (exp_avg_sq), all caller-owned. step is 1-based (this update's count, for bias
// correction). grad_scale multiplies every gradient first (the clipping coefficient, so the
// caller need not rewrite gradients). decay selects decoupled weight decay,
// p ← p − lr·wd·p: true for rank-2 matrices other than embed.weight. Elementwise, so
// bit-identical for any thread count. kInvalidArgument for n < 0 or step < 1.
absl::Status AdamwStep(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                       float lr, bool decay, float grad_scale = 1.0f, const AdamWOptions& opt = {});
// The same update on the calling thread only: for callers that spread many tensors' pieces
// over the threads themselves (one parallel region per step instead of one per tensor). It
// runs inside the caller's parallel region, where no error can be returned: the caller checks
// n >= 0 and step >= 1 (AdamwStep's checks) before the region.
void AdamwStepOneThread(float* param, const float* grad, float* m, float* v, int64_t n,
                        int64_t step, float lr, bool decay, float grad_scale = 1.0f,
                        const AdamWOptions& opt = {});

// Learning rate at 0-based step: linear warm-up lr = peak·(step+1)/warmup_steps for
// step < warmup_steps, then cosine from peak (at step = warmup_steps) to min_ratio·peak
// (at step = total_steps), held at min_ratio·peak after that.
float LrAt(int64_t step, int64_t warmup_steps, int64_t total_steps, float peak_lr,
           float min_ratio = 0.1f);

// Σ g² in double, in fixed blocks of kSumOfSquaresBlock elements, each summed in a fixed order
// (SumOfSquaresBlock), the block sums added in block order: identical for any thread count.
// Stage-local partial sums are added by the caller (in stage order) before the sqrt.
inline constexpr int64_t kSumOfSquaresBlock = 8192;
double SumOfSquares(const float* g, int64_t n);
// One block's sum (n <= kSumOfSquaresBlock) on the calling thread: eight interleaved running
// sums (element i into sum i % 8) added in lane order. A caller that spreads blocks of many
// tensors over the threads adds these exactly as SumOfSquares does.
double SumOfSquaresBlock(const float* g, int64_t n);

// sqrt of Σ over tensors (in the given order) of SumOfSquares.
double GlobalGradNorm(std::span<const std::span<const float>> grads);

// Clipping coefficient: min(1, max_norm / (norm + 1e-6)), the grad_scale for AdamwStep.
float ClipCoefficient(double norm, float max_norm = 1.0f);

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_ADAMW_H_
