#ifndef XHC_KERNELS_CPU_NN_SWIGLU_H_
#define XHC_KERNELS_CPU_NN_SWIGLU_H_

// SwiGLU gate h = silu(a) ⊙ b, with a = x·w1ᵀ and b = x·w3ᵀ computed by separate matmul calls
// (model-spec §3). Elementwise, so it saves nothing beyond its inputs a and b.
// Buffers caller-allocated, length n, no aliasing between outputs and inputs.

#include "absl/status/status.h"

namespace xhc::nn {

absl::Status SwigluForward(float* h, const float* a, const float* b, long n);

// Overwrites da and db.
absl::Status SwigluBackward(float* da, float* db, const float* dh, const float* a, const float* b,
                            long n);

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_SWIGLU_H_
