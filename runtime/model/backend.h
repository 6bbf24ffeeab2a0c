#ifndef XHC_RUNTIME_MODEL_BACKEND_H_
#define XHC_RUNTIME_MODEL_BACKEND_H_

// Compile-time choice of kernels by scalar type: the float32 model (what trains) runs the
// optimized CPU kernels; the double model runs the naive references, so whole-model
// gradients can be checked against finite differences in double precision.

#include <cstdint>

#include "kernels/cpu/nn/attention.h"
#include "kernels/cpu/nn/attention_ref.h"
#include "kernels/cpu/nn/cross_entropy.h"
#include "kernels/cpu/nn/cross_entropy_ref.h"
#include "kernels/cpu/nn/matmul.h"
#include "kernels/cpu/nn/matmul_ref.h"
#include "kernels/cpu/nn/rmsnorm.h"
#include "kernels/cpu/nn/rmsnorm_ref.h"
#include "kernels/cpu/nn/rope.h"
#include "kernels/cpu/nn/rope_ref.h"
#include "kernels/cpu/nn/swiglu.h"
#include "kernels/cpu/nn/swiglu_ref.h"
#include "runtime/model/xhc_kernels.h"

namespace xhc::model {

template <typename T>
struct Backend;

template <>
struct Backend<float> {
  static constexpr bool kOptimized = true;
  // Transformer ops.
  static void MatmulForward(float* y, const float* x, const float* w, int M, int K, int N) {
    nn::matmul_forward(y, x, w, M, K, N);
  }
  static void MatmulBackwardInput(float* dx, const float* dy, const float* w, int M, int K, int N,
                                  bool acc) {
    nn::matmul_backward_input(dx, dy, w, M, K, N, acc);
  }
  static void MatmulBackwardWeight(float* dw, const float* dy, const float* x, int M, int K,
                                   int N) {
    nn::matmul_backward_weight(dw, dy, x, M, K, N);
  }
  static void RmsnormForward(float* y, float* rstd, const float* x, const float* w, int R, int C,
                             double eps) {
    nn::rmsnorm_forward(y, rstd, x, w, R, C, static_cast<float>(eps));
  }
  static void RmsnormBackwardInput(float* dx, const float* dy, const float* x, const float* w,
                                   const float* rstd, int R, int C) {
    nn::rmsnorm_backward_input(dx, dy, x, w, rstd, R, C);
  }
  static void RmsnormBackwardWeight(float* dw, const float* dy, const float* x, const float* rstd,
                                    int R, int C) {
    nn::rmsnorm_backward_weight(dw, dy, x, rstd, R, C);
  }
  static void RopeForward(float* out, const float* x, int B, int T, int H, int dh, double th) {
    nn::rope_forward(out, x, B, T, H, dh, static_cast<float>(th));
  }
  static void RopeBackward(float* dx, const float* dout, int B, int T, int H, int dh, double th) {
    nn::rope_backward(dx, dout, B, T, H, dh, static_cast<float>(th));
  }
  static void AttentionForward(float* out, float* lse, const float* q, const float* k,
                               const float* v, int B, int T, int H, int Hkv, int dh) {
    nn::attention_forward(out, lse, q, k, v, B, T, H, Hkv, dh);
  }
  static void AttentionBackward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                                const float* k, const float* v, const float* out, const float* lse,
                                int B, int T, int H, int Hkv, int dh) {
    nn::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, Hkv, dh);
  }
  static void SwigluForward(float* h, const float* a, const float* b, long n) {
    nn::swiglu_forward(h, a, b, n);
  }
  static void SwigluBackward(float* da, float* db, const float* dh, const float* a, const float* b,
                             long n) {
    nn::swiglu_backward(da, db, dh, a, b, n);
  }
  static double CrossEntropyForward(float* lse, const float* logits, const int32_t* targets, int R,
                                    int V) {
    return nn::cross_entropy_forward(lse, logits, targets, R, V);
  }
  static void CrossEntropyBackward(float* dlogits, const float* logits, const float* lse,
                                   const int32_t* targets, int R, int V, double scale) {
    nn::cross_entropy_backward(dlogits, logits, lse, targets, R, V, static_cast<float>(scale));
  }
  // xHC residual kernels: the fused, multi-threaded path.
  using Xhc = XhcKernels<float, /*optimized=*/true>;
};

template <>
struct Backend<double> {
  static constexpr bool kOptimized = false;
  using T = double;
  static void MatmulForward(T* y, const T* x, const T* w, int M, int K, int N) {
    nn::ref::matmul_forward(y, x, w, M, K, N);
  }
  static void MatmulBackwardInput(T* dx, const T* dy, const T* w, int M, int K, int N, bool acc) {
    nn::ref::matmul_backward_input(dx, dy, w, M, K, N, acc);
  }
  static void MatmulBackwardWeight(T* dw, const T* dy, const T* x, int M, int K, int N) {
    nn::ref::matmul_backward_weight(dw, dy, x, M, K, N);
  }
  static void RmsnormForward(T* y, T* rstd, const T* x, const T* w, int R, int C, double eps) {
    nn::ref::rmsnorm_forward(y, rstd, x, w, R, C, eps);
  }
  static void RmsnormBackwardInput(T* dx, const T* dy, const T* x, const T* w, const T* rstd, int R,
                                   int C) {
    nn::ref::rmsnorm_backward_input(dx, dy, x, w, rstd, R, C);
  }
  static void RmsnormBackwardWeight(T* dw, const T* dy, const T* x, const T* rstd, int R, int C) {
    nn::ref::rmsnorm_backward_weight(dw, dy, x, rstd, R, C);
  }
  static void RopeForward(T* out, const T* x, int B, int Tl, int H, int dh, double th) {
    nn::ref::rope_forward(out, x, B, Tl, H, dh, th);
  }
  static void RopeBackward(T* dx, const T* dout, int B, int Tl, int H, int dh, double th) {
    nn::ref::rope_backward(dx, dout, B, Tl, H, dh, th);
  }
  static void AttentionForward(T* out, T* lse, const T* q, const T* k, const T* v, int B, int Tl,
                               int H, int Hkv, int dh) {
    nn::ref::attention_forward(out, lse, q, k, v, B, Tl, H, Hkv, dh);
  }
  static void AttentionBackward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k,
                                const T* v, const T* out, const T* lse, int B, int Tl, int H,
                                int Hkv, int dh) {
    nn::ref::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, B, Tl, H, Hkv, dh);
  }
  static void SwigluForward(T* h, const T* a, const T* b, long n) {
    nn::ref::swiglu_forward(h, a, b, n);
  }
  static void SwigluBackward(T* da, T* db, const T* dh, const T* a, const T* b, long n) {
    nn::ref::swiglu_backward(da, db, dh, a, b, n);
  }
  static double CrossEntropyForward(T* lse, const T* logits, const int32_t* targets, int R, int V) {
    return nn::ref::cross_entropy_forward(lse, logits, targets, R, V);
  }
  static void CrossEntropyBackward(T* dlogits, const T* logits, const T* lse,
                                   const int32_t* targets, int R, int V, double scale) {
    nn::ref::cross_entropy_backward(dlogits, logits, lse, targets, R, V, scale);
  }
  using Xhc = XhcKernels<double, /*optimized=*/false>;
};

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_BACKEND_H_
