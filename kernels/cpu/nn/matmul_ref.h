#ifndef XHC_KERNELS_CPU_NN_MATMUL_REF_H_
#define XHC_KERNELS_CPU_NN_MATMUL_REF_H_

// Naive reference for nn.Linear without bias: y = x · Wᵀ, W stored [out, in].
// Templated so the finite-difference tests can run it in double.

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

namespace xhc::nn::ref {

// x is (M,K), w is (N,K), y is (M,N). Overwrites y.
template <typename T>
absl::Status MatmulForward(T* y, const T* x, const T* w, int M, int K, int N) {
  RETURN_IF_ERROR(CheckDims("MatmulForward", {{"M", M}, {"K", K}, {"N", N}}));
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      T acc = 0;
      for (int k = 0; k < K; ++k) acc += x[m * K + k] * w[n * K + k];
      y[m * N + n] = acc;
    }
  }
  return absl::OkStatus();
}

// dy is (M,N), w is (N,K), dx is (M,K): dx = dy · W (overwrites, or adds if accumulate).
template <typename T>
absl::Status MatmulBackwardInput(T* dx, const T* dy, const T* w, int M, int K, int N,
                                 bool accumulate = false) {
  RETURN_IF_ERROR(CheckDims("MatmulBackwardInput", {{"M", M}, {"K", K}, {"N", N}}));
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < K; ++k) {
      T acc = 0;
      for (int n = 0; n < N; ++n) acc += dy[m * N + n] * w[n * K + k];
      dx[m * K + k] = accumulate ? dx[m * K + k] + acc : acc;
    }
  }
  return absl::OkStatus();
}

// dy is (M,N), x is (M,K), dw is (N,K): dw += dyᵀ · x.
template <typename T>
absl::Status MatmulBackwardWeight(T* dw, const T* dy, const T* x, int M, int K, int N) {
  RETURN_IF_ERROR(CheckDims("MatmulBackwardWeight", {{"M", M}, {"K", K}, {"N", N}}));
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < K; ++k) {
      T acc = 0;
      for (int m = 0; m < M; ++m) acc += dy[m * N + n] * x[m * K + k];
      dw[n * K + k] += acc;
    }
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_MATMUL_REF_H_
