#include "kernels/cpu/nn/matmul.h"

#include <algorithm>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"
#include "third_party/openblas_cblas.h"

namespace xhc::nn {
namespace {

// OpenBLAS 0.3.21 is not bit-stable across its own thread counts (the M/N partition picks
// different edge kernels), so parallelism is ours: the output is cut into blocks of a fixed
// size, independent of the thread count, and OpenMP threads each run single-threaded sgemm
// calls on whole blocks. Same blocks, same calls, same bits for any number of threads.
constexpr int kBlock = 128;

void pin_openblas_to_one_thread() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

int num_blocks(int n) { return (n + kBlock - 1) / kBlock; }

}  // namespace

absl::Status MatmulForward(float* y, const float* x, const float* w, int M, int K, int N) {
  RETURN_IF_ERROR(CheckDims("MatmulForward", {{"M", M}, {"K", K}, {"N", N}}));
  if (M == 0 || N == 0) return absl::OkStatus();
  pin_openblas_to_one_thread();
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks(M); ++blk) {
    const int m0 = blk * kBlock, rows = std::min(kBlock, M - m0);
    // y[m0:m0+rows] (rows,N) = x[m0:m0+rows] (rows,K) · w(N,K)ᵀ
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, N, K, 1.0f,
                x + static_cast<long>(m0) * K, K, w, K, 0.0f, y + static_cast<long>(m0) * N, N);
  }
  return absl::OkStatus();
}

absl::Status MatmulBackwardInput(float* dx, const float* dy, const float* w, int M, int K, int N,
                                 bool accumulate) {
  RETURN_IF_ERROR(CheckDims("MatmulBackwardInput", {{"M", M}, {"K", K}, {"N", N}}));
  if (M == 0 || K == 0) return absl::OkStatus();
  pin_openblas_to_one_thread();
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks(M); ++blk) {
    const int m0 = blk * kBlock, rows = std::min(kBlock, M - m0);
    // dx[m0:] (rows,K) = dy[m0:] (rows,N) · w(N,K)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, K, N, 1.0f,
                dy + static_cast<long>(m0) * N, N, w, K, accumulate ? 1.0f : 0.0f,
                dx + static_cast<long>(m0) * K, K);
  }
  return absl::OkStatus();
}

absl::Status MatmulBackwardWeight(float* dw, const float* dy, const float* x, int M, int K, int N) {
  RETURN_IF_ERROR(CheckDims("MatmulBackwardWeight", {{"M", M}, {"K", K}, {"N", N}}));
  if (N == 0 || K == 0) return absl::OkStatus();
  pin_openblas_to_one_thread();
  // Blocks over output rows of dw, so each block still sums over all M tokens inside one
  // sgemm call and no cross-block reduction is needed.
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks(N); ++blk) {
    const int n0 = blk * kBlock, rows = std::min(kBlock, N - n0);
    // dw[n0:] (rows,K) += dy[:, n0:n0+rows]ᵀ (rows,M) · x(M,K)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, rows, K, M, 1.0f, dy + n0, N, x, K, 1.0f,
                dw + static_cast<long>(n0) * K, K);
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn
