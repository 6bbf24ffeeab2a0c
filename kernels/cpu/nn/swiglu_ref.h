#ifndef XHC_KERNELS_CPU_NN_SWIGLU_REF_H_
#define XHC_KERNELS_CPU_NN_SWIGLU_REF_H_

#include <cmath>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

// Naive reference for the SwiGLU gate h = silu(a) ⊙ b (model-spec §3), silu(x) = x·σ(x).

namespace xhc::nn::ref {

// a, b, h are (n) (any (rows, d_ff) flattened).
template <typename T>
absl::Status SwigluForward(T* h, const T* a, const T* b, long n) {
  RETURN_IF_ERROR(CheckDims("SwigluForward", {{"n", n}}));
  for (long i = 0; i < n; ++i) {
    const T sig = T(1) / (T(1) + std::exp(-a[i]));
    h[i] = a[i] * sig * b[i];
  }
  return absl::OkStatus();
}

// da = dh ⊙ b ⊙ silu'(a), silu'(a) = σ(a)(1 + a(1 − σ(a))); db = dh ⊙ silu(a). Overwrites.
template <typename T>
absl::Status SwigluBackward(T* da, T* db, const T* dh, const T* a, const T* b, long n) {
  RETURN_IF_ERROR(CheckDims("SwigluBackward", {{"n", n}}));
  for (long i = 0; i < n; ++i) {
    const T sig = T(1) / (T(1) + std::exp(-a[i]));
    da[i] = dh[i] * b[i] * sig * (T(1) + a[i] * (T(1) - sig));
    db[i] = dh[i] * a[i] * sig;
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_SWIGLU_REF_H_
