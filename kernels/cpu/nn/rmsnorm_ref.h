#ifndef XHC_KERNELS_CPU_NN_RMSNORM_REF_H_
#define XHC_KERNELS_CPU_NN_RMSNORM_REF_H_

#include <cmath>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

// Naive reference for y = x / sqrt(mean(x²) + eps) ⊙ w (model-spec §2).

namespace xhc::nn::ref {

// x is (R,C), w is (C), y is (R,C), rstd is (R) = 1/sqrt(mean(x²)+eps), saved for backward.
template <typename T>
absl::Status RmsnormForward(T* y, T* rstd, const T* x, const T* w, int R, int C, T eps) {
  RETURN_IF_ERROR(CheckDims("RmsnormForward", {{"R", R}, {"C", C}}));
  for (int r = 0; r < R; ++r) {
    T ss = 0;
    for (int c = 0; c < C; ++c) ss += x[r * C + c] * x[r * C + c];
    T s = T(1) / std::sqrt(ss / C + eps);
    rstd[r] = s;
    for (int c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * s * w[c];
  }
  return absl::OkStatus();
}

// dx is (R,C), overwritten: with n = x·rstd, dx = rstd · (w⊙dy − n · mean(w⊙dy⊙n)).
template <typename T>
absl::Status RmsnormBackwardInput(T* dx, const T* dy, const T* x, const T* w, const T* rstd, int R,
                                  int C) {
  RETURN_IF_ERROR(CheckDims("RmsnormBackwardInput", {{"R", R}, {"C", C}}));
  for (int r = 0; r < R; ++r) {
    T dot = 0;
    for (int c = 0; c < C; ++c) dot += w[c] * dy[r * C + c] * x[r * C + c] * rstd[r];
    T mean = dot / C;
    for (int c = 0; c < C; ++c) {
      T n = x[r * C + c] * rstd[r];
      dx[r * C + c] = rstd[r] * (w[c] * dy[r * C + c] - n * mean);
    }
  }
  return absl::OkStatus();
}

// dw is (C): dw += Σ_r dy ⊙ x·rstd.
template <typename T>
absl::Status RmsnormBackwardWeight(T* dw, const T* dy, const T* x, const T* rstd, int R, int C) {
  RETURN_IF_ERROR(CheckDims("RmsnormBackwardWeight", {{"R", R}, {"C", C}}));
  for (int c = 0; c < C; ++c) {
    T acc = 0;
    for (int r = 0; r < R; ++r) acc += dy[r * C + c] * x[r * C + c] * rstd[r];
    dw[c] += acc;
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_RMSNORM_REF_H_
