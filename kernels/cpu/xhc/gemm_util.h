#ifndef XHC_KERNELS_CPU_XHC_GEMM_UTIL_H_
#define XHC_KERNELS_CPU_XHC_GEMM_UTIL_H_

// Row-major sgemm whose result does not depend on the number of threads.
//
// Why: OpenBLAS's own threading splits the output among threads, and the tiles at a split
// boundary go through its edge kernels, which round differently; measured here, 1 vs 2
// OpenBLAS threads changed results in the last bit. So we run OpenBLAS single-threaded on
// blocks of a FIXED size (rows, or columns when the output is wide and short) and spread the
// blocks over OpenMP threads: every block is the same call whatever thread runs it.
// Side effect: leaves OpenBLAS's own thread count at 1 (as kernels/cpu/nn does).

#include <cstddef>

namespace xhc::kernels::cpu {

// C (M, N) = op(A) (M, K) . op(B) (K, N) + beta * C
void DeterministicSgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                        const float* B, int ldb, float beta, float* C, int ldc);

// out (R, D) = A^T (R, n) . X (n, D) (A row-major (n, R), lda = R; out row stride D): the
// weight-gradient product, through AtXRows (skinny_gemm.h) on column blocks of one width
// (AtXColumnBlockWidth) spread over OpenMP threads. Each element is one running sum over the
// tokens in order, so the result does not depend on the thread count (nor on the block size).
// Leaves OpenBLAS alone.
// sparse_rows: AtXRows' (A's first columns mostly zero: their zeros are skipped, same bits).
void AtXColumns(int n, int R, int D, const float* A, const float* X, size_t ldx, float* out,
                int sparse_rows = 0);
// AtXColumns' widest column block: one AtXRows call each (its sums, R x kAtXColumns, stay in
// L2).
constexpr int kAtXColumns = 1152;
// The width of AtXColumns' blocks of D columns for `threads` threads: at most kAtXColumns, a
// multiple of 16, and a block count the threads share evenly (where D allows).
int AtXColumnBlockWidth(int D, int threads);

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_GEMM_UTIL_H_
