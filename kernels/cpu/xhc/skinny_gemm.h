#ifndef XHC_KERNELS_CPU_XHC_SKINNY_GEMM_H_
#define XHC_KERNELS_CPU_XHC_SKINNY_GEMM_H_

// Skinny products of a small block of tokens (at most kMaxTokens rows) with a wide weight
// matrix W (R rows of length D), for the fused token passes: the caller walks the state in
// token blocks that stay in L2, and these kernels walk W in column chunks that stay in L1/L2,
// so the state block is read from memory once and W once per block.
//
// Determinism: every output element is reduced in a fixed order that depends only on its own
// row and the shapes (not on the block it sits in, nor on the thread). Which instructions
// form the sums depends on the path (skinny_gemm_isa.h): avx512 (FMA, 16 lanes), avx2 (FMA,
// 8 lanes), generic (separate multiply and add, 16 lanes). So results can differ in the last
// bits between paths (machines, or XHC_CPU_ISA), never between runs or thread counts on one.

#include <cstddef>

#include "kernels/cpu/xhc/skinny_gemm_isa.h"

namespace xhc::kernels::cpu {

constexpr int kMaxTokens = 16;

// out[t * ldo + r] = sum_c X[t * ldx + c] * W[r * ldw + c], t < nt, r < R, c < D.
void DotRows(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
             float* out, int ldo);

// out[t * ldo + c] (+)= sum_r A[t * lda + r] * W[r * ldw + c], t < nt, c < D; the sum over r
// is formed first, then added to out when accumulate (else stored).
void AxpyRows(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw,
              float* out, size_t ldo, bool accumulate);

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_SKINNY_GEMM_H_
