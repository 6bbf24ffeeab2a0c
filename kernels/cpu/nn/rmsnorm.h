#ifndef XHC_KERNELS_CPU_NN_RMSNORM_H_
#define XHC_KERNELS_CPU_NN_RMSNORM_H_

// RMSNorm with a learned weight: y = x / sqrt(mean(x²) + eps) ⊙ w (model-spec §2, eps is
// norm_eps). Backward split into the input gradient and the deferred weight gradient.
// All buffers caller-allocated, row-major, no aliasing. Parallel over rows (forward, dx) and
// over channel chunks (dw); every output element is summed by one thread in a fixed order,
// so results are bit-identical for any thread count.

#include "absl/status/status.h"

namespace xhc::nn {

// x is (R,C), w is (C) -> y is (R,C); rstd is (R), saved for backward.
absl::Status RmsnormForward(float* y, float* rstd, const float* x, const float* w, int R, int C,
                            float eps);

// dy, x are (R,C), rstd from forward -> dx is (R,C), overwritten.
absl::Status RmsnormBackwardInput(float* dx, const float* dy, const float* x, const float* w,
                                  const float* rstd, int R, int C);

// dw is (C): dw += Σ_rows dy ⊙ x·rstd.
absl::Status RmsnormBackwardWeight(float* dw, const float* dy, const float* x, const float* rstd,
                                   int R, int C);

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_RMSNORM_H_
