#include "kernels/cpu/nn/matmul.h"

#include "third_party/openblas_cblas.h"

namespace xhc::nn {

void matmul_forward(float* y, const float* x, const float* w, int M, int K, int N) {
  if (M == 0 || N == 0) return;
  // y(M,N) = x(M,K) · w(N,K)ᵀ
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y,
              N);
}

void matmul_backward_input(float* dx, const float* dy, const float* w, int M, int K, int N,
                           bool accumulate) {
  if (M == 0 || K == 0) return;
  // dx(M,K) = dy(M,N) · w(N,K)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1.0f, dy, N, w, K,
              accumulate ? 1.0f : 0.0f, dx, K);
}

void matmul_backward_weight(float* dw, const float* dy, const float* x, int M, int K, int N) {
  if (N == 0 || K == 0) return;
  // dw(N,K) += dy(M,N)ᵀ · x(M,K)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1.0f, dy, N, x, K, 1.0f, dw,
              K);
}

}  // namespace xhc::nn
