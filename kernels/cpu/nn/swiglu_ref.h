#ifndef XHC_KERNELS_CPU_NN_SWIGLU_REF_H_
#define XHC_KERNELS_CPU_NN_SWIGLU_REF_H_

#include <cmath>

// Naive reference for the SwiGLU gate h = silu(a) ⊙ b (model-spec §3), silu(x) = x·σ(x).

namespace xhc::nn::ref {

// a, b, h are (n) (any (rows, d_ff) flattened).
template <typename T>
void swiglu_forward(T* h, const T* a, const T* b, long n) {
  for (long i = 0; i < n; ++i) {
    const T sig = T(1) / (T(1) + std::exp(-a[i]));
    h[i] = a[i] * sig * b[i];
  }
}

// da = dh ⊙ b ⊙ silu'(a), silu'(a) = σ(a)(1 + a(1 − σ(a))); db = dh ⊙ silu(a). Overwrites.
template <typename T>
void swiglu_backward(T* da, T* db, const T* dh, const T* a, const T* b, long n) {
  for (long i = 0; i < n; ++i) {
    const T sig = T(1) / (T(1) + std::exp(-a[i]));
    da[i] = dh[i] * b[i] * sig * (T(1) + a[i] * (T(1) - sig));
    db[i] = dh[i] * a[i] * sig;
  }
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_SWIGLU_REF_H_
