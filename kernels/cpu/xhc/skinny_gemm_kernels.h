#ifndef XHC_KERNELS_CPU_XHC_SKINNY_GEMM_KERNELS_H_
#define XHC_KERNELS_CPU_XHC_SKINNY_GEMM_KERNELS_H_

// The per-ISA versions of DotRows / AxpyRows (skinny_gemm.h), for its dispatcher only: each
// is called with nt <= kMaxTokens, and only on a CPU that supports it (skinny_gemm_isa.h).

#include <cstddef>

#include "kernels/cpu/xhc/skinny_gemm.h"

namespace xhc::kernels::cpu::internal {

using PackedBuffer = decltype(SkinnyWeights::packed);

void DotRowsGeneric(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
                    float* out, int ldo);
void AxpyRowsGeneric(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw,
                     float* out, size_t ldo, bool accumulate);

// Defined where the compiler targets x86-64 (XHC_SKINNY_X86).
void DotRowsAvx2(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
                 float* out, int ldo);
void AxpyRowsAvx2(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw,
                  float* out, size_t ldo, bool accumulate);
// Whole-W packing for SkinnyWeights, and the kernel reading it (packed: that layout).
void PackDotRowsAvx2(int R, int D, const float* W, size_t ldw, PackedBuffer* packed);
void DotRowsAvx2Packed(int nt, int R, int D, const float* X, size_t ldx, const float* packed,
                       float* out, int ldo);
void PackAxpyRowsAvx2(int R, int D, const float* W, size_t ldw, PackedBuffer* packed);
void AxpyRowsAvx2Packed(int nt, int R, int D, const float* A, int lda, const float* packed,
                        float* out, size_t ldo, bool accumulate);
void AtXRowsGeneric(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx,
                    float* out, size_t ldo, int sparse_rows);
void AtXRowsAvx2(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx,
                 float* out, size_t ldo, int sparse_rows);
void DotRowsAvx512(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
                   float* out, int ldo);
void AxpyRowsAvx512(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw,
                    float* out, size_t ldo, bool accumulate);
void PackDotRowsAvx512(int R, int D, const float* W, size_t ldw, PackedBuffer* packed);
void DotRowsAvx512Packed(int nt, int R, int D, const float* X, size_t ldx, const float* packed,
                         float* out, int ldo);
void PackAxpyRowsAvx512(int R, int D, const float* W, size_t ldw, PackedBuffer* packed);
void AxpyRowsAvx512Packed(int nt, int R, int D, const float* A, int lda, const float* packed,
                          float* out, size_t ldo, bool accumulate);
void AtXRowsAvx512(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx,
                   float* out, size_t ldo, int sparse_rows);

}  // namespace xhc::kernels::cpu::internal

#if defined(__x86_64__) && defined(__GNUC__)
#define XHC_SKINNY_X86 1
#endif

#endif  // XHC_KERNELS_CPU_XHC_SKINNY_GEMM_KERNELS_H_
