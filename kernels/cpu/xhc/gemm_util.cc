#include "kernels/cpu/xhc/gemm_util.h"

#include <omp.h>

#include <algorithm>

#include "kernels/cpu/xhc/skinny_gemm.h"
#include "third_party/openblas_cblas.h"

namespace xhc::kernels::cpu {

void DeterministicSgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                        const float* B, int ldb, float beta, float* C, int ldc) {
  // 256-row blocks: OpenBLAS packs the whole B operand on every call, so with the skinny
  // [tokens, 16384] x [16384, 32] projections 64-row blocks spent as long packing B as
  // computing; 256 rows still give 16 blocks for 4096 tokens.
  constexpr int kRowBlock = 256, kColBlock = 512;
  const bool by_rows = M >= N;
  const int block = by_rows ? kRowBlock : kColBlock;
  const int extent = by_rows ? M : N;
  const int num_blocks = (extent + block - 1) / block;
  const CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  // OpenBLAS runs single-threaded inside our OpenMP blocks. Setting the thread count is not
  // free (it wakes / parks the pool), so do it only when someone changed it; like
  // kernels/cpu/nn, we leave it at 1 rather than toggling it back on every call.
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
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
}

int AtXColumnBlockWidth(int D, int threads) {
  // Blocks of at most kAtXColumns (six AtXRows chunks: each token's row read as a 4.5 KiB run,
  // the sums in L2), as many as the threads share evenly, all of one width: fixed
  // kAtXColumns-wide blocks left one thread a block more than the other (D = 16384: 15 blocks,
  // 8 x 1152 columns against 6 x 1152 + 256; docs/design/skinny-gemm-and-isa-dispatch.md).
  threads = std::max(1, threads);
  int blocks = (D + kAtXColumns - 1) / kAtXColumns;
  blocks = (blocks + threads - 1) / threads * threads;
  return std::max(16, ((D + blocks - 1) / blocks + 15) / 16 * 16);
}

void AtXColumns(int n, int R, int D, const float* A, const float* X, size_t ldx, float* out,
                int sparse_rows) {
  const int width = AtXColumnBlockWidth(D, omp_get_max_threads());
  const int num_blocks = (D + width - 1) / width;
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int s = blk * width, len = std::min(width, D - s);
    AtXRows(n, R, len, A, R, X + s, ldx, out + s, D, sparse_rows);
  }
}

}  // namespace xhc::kernels::cpu
