#include "kernels/cpu/xhc/gemm_util.h"

#include <algorithm>

#include "third_party/openblas_cblas.h"

namespace xhc::kernels::cpu {

void DeterministicSgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A,
                        int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  constexpr int kRowBlock = 64, kColBlock = 512;
  const bool by_rows = M >= N;
  const int block = by_rows ? kRowBlock : kColBlock;
  const int extent = by_rows ? M : N;
  const int num_blocks = (extent + block - 1) / block;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  const int saved_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int s = blk * block, len = std::min(block, extent - s);
    if (by_rows) {
      const float* a = trans_a ? A + s : A + static_cast<size_t>(s) * lda;
      cblas_sgemm(CblasRowMajor, ta, tb, len, N, K, 1.0f, a, lda, B, ldb, beta,
                  C + static_cast<size_t>(s) * ldc, ldc);
    } else {
      const float* b = trans_b ? B + static_cast<size_t>(s) * ldb : B + s;
      cblas_sgemm(CblasRowMajor, ta, tb, M, len, K, 1.0f, A, lda, b, ldb, beta, C + s, ldc);
    }
  }
  openblas_set_num_threads(saved_threads);
}

}  // namespace xhc::kernels::cpu
