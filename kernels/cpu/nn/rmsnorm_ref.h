#ifndef XHC_KERNELS_CPU_NN_RMSNORM_REF_H_
#define XHC_KERNELS_CPU_NN_RMSNORM_REF_H_

#include <cmath>

// Naive reference for y = x / sqrt(mean(x²) + eps) ⊙ w (model-spec §2).

namespace xhc::nn::ref {

// x is (R,C), w is (C), y is (R,C), rstd is (R) = 1/sqrt(mean(x²)+eps), saved for backward.
template <typename T>
void rmsnorm_forward(T* y, T* rstd, const T* x, const T* w, int R, int C, T eps) {
  for (int r = 0; r < R; ++r) {
    T ss = 0;
    for (int c = 0; c < C; ++c) ss += x[r * C + c] * x[r * C + c];
    T s = T(1) / std::sqrt(ss / C + eps);
    rstd[r] = s;
    for (int c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * s * w[c];
  }
}

// dx is (R,C), overwritten: with n = x·rstd, dx = rstd · (w⊙dy − n · mean(w⊙dy⊙n)).
template <typename T>
void rmsnorm_backward_input(T* dx, const T* dy, const T* x, const T* w, const T* rstd, int R,
                            int C) {
  for (int r = 0; r < R; ++r) {
    T dot = 0;
    for (int c = 0; c < C; ++c) dot += w[c] * dy[r * C + c] * x[r * C + c] * rstd[r];
    T mean = dot / C;
    for (int c = 0; c < C; ++c) {
      T n = x[r * C + c] * rstd[r];
      dx[r * C + c] = rstd[r] * (w[c] * dy[r * C + c] - n * mean);
    }
  }
}

// dw is (C): dw += Σ_r dy ⊙ x·rstd.
template <typename T>
void rmsnorm_backward_weight(T* dw, const T* dy, const T* x, const T* rstd, int R, int C) {
  for (int c = 0; c < C; ++c) {
    T acc = 0;
    for (int r = 0; r < R; ++r) acc += dy[r * C + c] * x[r * C + c] * rstd[r];
    dw[c] += acc;
  }
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_RMSNORM_REF_H_
