#ifndef XHC_KERNELS_CPU_NN_ROPE_H_
#define XHC_KERNELS_CPU_NN_ROPE_H_

// Rotary position embeddings, half-split convention, 0-based positions within each sequence
// (model-spec §3). Apply once to q (H heads) and once to k (Hkv heads). The op is linear and
// orthogonal, so it saves nothing: the backward is the inverse rotation of the gradient.
// Buffers are caller-allocated (B,T,H,dh) row-major; out may alias x (in place). dh must be
// even (the config validator rejects odd head dims). Parallel over (b,t) rows; each element
// is computed independently, so results do not depend on the thread count.

#include "absl/status/status.h"

namespace xhc::nn {

// out = RoPE(x). theta is rope_theta (10000 by default).
absl::Status RopeForward(float* out, const float* x, int B, int T, int H, int dh, float theta);

// dx = RoPE⁻¹(dout). dx may alias dout.
absl::Status RopeBackward(float* dx, const float* dout, int B, int T, int H, int dh, float theta);

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_ROPE_H_
