#ifndef XHC_KERNELS_CPU_NN_ADAMW_REF_H_
#define XHC_KERNELS_CPU_NN_ADAMW_REF_H_

#include <cmath>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

// Naive reference AdamW step (PyTorch semantics, model-spec §6), one element at a time.

namespace xhc::nn::ref {

// step is 1-based (the count including this update). grad_scale multiplies the gradient
// before use (the clipping coefficient). Decay is decoupled: p ← p − lr·wd·p.
template <typename T>
absl::Status AdamwStep(T* param, const T* grad, T* m, T* v, long n, long step, T lr, T beta1,
                       T beta2, T eps, T weight_decay, bool decay, T grad_scale) {
  RETURN_IF_ERROR(CheckAdamw("AdamwStep", n, step));
  const T bc1 = T(1) - std::pow(beta1, static_cast<T>(step));
  const T bc2 = T(1) - std::pow(beta2, static_cast<T>(step));
  for (long i = 0; i < n; ++i) {
    const T g = grad[i] * grad_scale;
    if (decay) param[i] -= lr * weight_decay * param[i];
    m[i] = beta1 * m[i] + (T(1) - beta1) * g;
    v[i] = beta2 * v[i] + (T(1) - beta2) * g * g;
    const T mhat = m[i] / bc1;
    const T vhat = v[i] / bc2;
    param[i] -= lr * mhat / (std::sqrt(vhat) + eps);
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_ADAMW_REF_H_
