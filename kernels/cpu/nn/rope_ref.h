#ifndef XHC_KERNELS_CPU_NN_ROPE_REF_H_
#define XHC_KERNELS_CPU_NN_ROPE_REF_H_

#include <cmath>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

// Naive reference for rotary embeddings, half-split convention (model-spec §3): per head,
// x1 = x[:dh/2], x2 = x[dh/2:], θ_j = t · theta^(−2j/dh), t the 0-based position in the
// sequence; x ← [x1·cos θ − x2·sin θ, x1·sin θ + x2·cos θ].

namespace xhc::nn::ref {

// x, out are (B,T,H,dh); out may alias x. sign = +1 rotates forward, −1 applies the
// inverse (= transposed) rotation, which is exactly the backward.
template <typename T>
void RopeRotate(T* out, const T* x, int B, int T_, int H, int dh, double theta, int sign) {
  const int half = dh / 2;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T_; ++t) {
      for (int h = 0; h < H; ++h) {
        const long base = ((static_cast<long>(b) * T_ + t) * H + h) * dh;
        for (int j = 0; j < half; ++j) {
          const double angle = t * std::pow(theta, -2.0 * j / dh);
          const T c = static_cast<T>(std::cos(angle));
          const T s = static_cast<T>(sign * std::sin(angle));
          const T x1 = x[base + j];
          const T x2 = x[base + half + j];
          out[base + j] = x1 * c - x2 * s;
          out[base + half + j] = x1 * s + x2 * c;
        }
      }
    }
  }
}

// out = RoPE(x).
template <typename T>
absl::Status RopeForward(T* out, const T* x, int B, int T_, int H, int dh, T theta) {
  RETURN_IF_ERROR(CheckRope("RopeForward", B, T_, H, dh));
  RopeRotate(out, x, B, T_, H, dh, theta, +1);
  return absl::OkStatus();
}

// dx = RoPE(x)ᵀ · dout (rotation by −θ).
template <typename T>
absl::Status RopeBackward(T* dx, const T* dout, int B, int T_, int H, int dh, T theta) {
  RETURN_IF_ERROR(CheckRope("RopeBackward", B, T_, H, dh));
  RopeRotate(dx, dout, B, T_, H, dh, theta, -1);
  return absl::OkStatus();
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_ROPE_REF_H_
