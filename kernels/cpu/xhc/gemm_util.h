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

namespace xhc::kernels::cpu {

// C (M, N) = op(A) (M, K) . op(B) (K, N) + beta * C
void DeterministicSgemm(bool trans_a, bool trans_b, int M, int N, int K, const float* A,
                        int lda, const float* B, int ldb, float beta, float* C, int ldc);

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_GEMM_UTIL_H_
