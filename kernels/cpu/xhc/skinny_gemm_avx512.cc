// AVX-512 versions of DotRows / AxpyRows (skinny_gemm.h): FMA, 16 lanes per partial sum.
// Compiled for AVX-512 by function attribute (the build targets x86-64-v2); run only where
// the CPU has it (skinny_gemm_isa.h).

#include <algorithm>
#include <cstring>

#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/skinny_gemm_kernels.h"

#ifdef XHC_SKINNY_X86
#include <immintrin.h>

namespace xhc::kernels::cpu::internal {
namespace {

constexpr int kL = 16;           // lanes of every partial sum
constexpr int kDotChunk = 1024;  // columns per chunk: W chunk (32 rows) = 128 KiB, in L2
constexpr int kAxpyChunk = 512;  // W chunk (32 rows) = 64 KiB

#define XHC_AVX512 __attribute__((target("avx512f,avx2,fma")))

// One TN x RN tile over columns [c0, c0 + cl): acc (TN, RN) 16-lane partial sums in memory.
template <int TN, int RN>
// pfx / pfw (nullable): the same tokens' / rows' next chunk, prefetched into L1 while this one
// is computed (the hardware prefetcher stops at each 4 KiB page, i.e. every chunk row).
XHC_AVX512 inline void DotTile(const float* X, size_t ldx, const float* W, size_t ldw, int c0,
                               int cl, float* acc /* [kMaxTokens][R][kL] */, int R,
                               const float* pfx, const float* pfw) {
  __m512 a[TN][RN];
  for (int i = 0; i < TN; ++i)
    for (int j = 0; j < RN; ++j) a[i][j] = _mm512_load_ps(acc + (i * R + j) * kL);
  int c = 0;
  for (; c + kL <= cl; c += kL) {
    if (pfx) {
      for (int i = 0; i < TN; ++i) _mm_prefetch(reinterpret_cast<const char*>(pfx + i * ldx + c), _MM_HINT_T0);
    }
    if (pfw) {
      for (int j = 0; j < RN; ++j) _mm_prefetch(reinterpret_cast<const char*>(pfw + j * ldw + c), _MM_HINT_T0);
    }
    __m512 w[RN];
    for (int j = 0; j < RN; ++j) w[j] = _mm512_loadu_ps(W + j * ldw + c0 + c);
    for (int i = 0; i < TN; ++i) {
      const __m512 x = _mm512_loadu_ps(X + i * ldx + c0 + c);
      for (int j = 0; j < RN; ++j) a[i][j] = _mm512_fmadd_ps(x, w[j], a[i][j]);
    }
  }
  if (c < cl) {
    const __mmask16 m = static_cast<__mmask16>((1u << (cl - c)) - 1);
    __m512 w[RN];
    for (int j = 0; j < RN; ++j) w[j] = _mm512_maskz_loadu_ps(m, W + j * ldw + c0 + c);
    for (int i = 0; i < TN; ++i) {
      const __m512 x = _mm512_maskz_loadu_ps(m, X + i * ldx + c0 + c);
      for (int j = 0; j < RN; ++j) a[i][j] = _mm512_fmadd_ps(x, w[j], a[i][j]);
    }
  }
  for (int i = 0; i < TN; ++i)
    for (int j = 0; j < RN; ++j) _mm512_store_ps(acc + (i * R + j) * kL, a[i][j]);
}

template <int TN>
XHC_AVX512 inline void DotTileRows(int rn, const float* X, size_t ldx, const float* W,
                                   size_t ldw, int c0, int cl, float* acc, int R,
                                   const float* pfx, const float* pfw) {
  switch (rn) {
    case 4: DotTile<TN, 4>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
    case 3: DotTile<TN, 3>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
    case 2: DotTile<TN, 2>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
    default: DotTile<TN, 1>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
  }
}

// Two column vectors x up to four tokens per step: W loads shared by the tokens.
template <int TN>
XHC_AVX512 inline void AxpyTile(int R, int cl, const float* A, int lda, const float* W,
                                size_t ldw, float* out, size_t ldo, bool accumulate) {
  int c = 0;
  for (; c + 2 * kL <= cl; c += 2 * kL) {
    __m512 a0[TN], a1[TN];
    for (int i = 0; i < TN; ++i) a0[i] = a1[i] = _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const __m512 w0 = _mm512_loadu_ps(W + r * ldw + c);
      const __m512 w1 = _mm512_loadu_ps(W + r * ldw + c + kL);
      for (int i = 0; i < TN; ++i) {
        const __m512 s = _mm512_set1_ps(A[i * lda + r]);
        a0[i] = _mm512_fmadd_ps(s, w0, a0[i]);
        a1[i] = _mm512_fmadd_ps(s, w1, a1[i]);
      }
    }
    for (int i = 0; i < TN; ++i) {
      float* o = out + i * ldo + c;
      if (accumulate) {
        a0[i] = _mm512_add_ps(_mm512_loadu_ps(o), a0[i]);
        a1[i] = _mm512_add_ps(_mm512_loadu_ps(o + kL), a1[i]);
      }
      _mm512_storeu_ps(o, a0[i]);
      _mm512_storeu_ps(o + kL, a1[i]);
    }
  }
  for (; c < cl; c += kL) {
    const __mmask16 m =
        cl - c >= kL ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (cl - c)) - 1);
    __m512 a0[TN];
    for (int i = 0; i < TN; ++i) a0[i] = _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const __m512 w0 = _mm512_maskz_loadu_ps(m, W + r * ldw + c);
      for (int i = 0; i < TN; ++i) {
        a0[i] = _mm512_fmadd_ps(_mm512_set1_ps(A[i * lda + r]), w0, a0[i]);
      }
    }
    for (int i = 0; i < TN; ++i) {
      float* o = out + i * ldo + c;
      if (accumulate) a0[i] = _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), a0[i]);
      _mm512_mask_storeu_ps(o, m, a0[i]);
    }
  }
}

}  // namespace

XHC_AVX512 void DotRowsAvx512(int nt, int R, int D, const float* X, size_t ldx,
                              const float* W, size_t ldw, float* out, int ldo) {
  constexpr int kMaxR = 32;
  if (R > kMaxR) {  // rows in groups of 32 (each output's reduction is unchanged)
    for (int r0 = 0; r0 < R; r0 += kMaxR) {
      DotRowsAvx512(nt, std::min(kMaxR, R - r0), D, X, ldx, W + r0 * ldw, ldw, out + r0, ldo);
    }
    return;
  }
  alignas(64) float acc[kMaxTokens * kMaxR * kL];
  std::memset(acc, 0, sizeof(float) * nt * R * kL);
  for (int c0 = 0; c0 < D; c0 += kDotChunk) {
    const int cl = std::min(kDotChunk, D - c0);
    const bool next = c0 + kDotChunk + kDotChunk <= D;  // prefetch only whole next chunks
    for (int t0 = 0; t0 < nt; t0 += 4) {
      const int tn = std::min(4, nt - t0);
      const float* x = X + t0 * ldx;
      float* at = acc + t0 * R * kL;
      for (int r0 = 0; r0 < R; r0 += 4) {
        const int rn = std::min(4, R - r0);
        const float* w = W + r0 * ldw;
        float* a = at + r0 * kL;
        const float* pfx = next && r0 == 0 ? x + c0 + kDotChunk : nullptr;
        const float* pfw = next && t0 == 0 ? w + c0 + kDotChunk : nullptr;
        switch (tn) {
          case 4: DotTileRows<4>(rn, x, ldx, w, ldw, c0, cl, a, R, pfx, pfw); break;
          case 3: DotTileRows<3>(rn, x, ldx, w, ldw, c0, cl, a, R, pfx, pfw); break;
          case 2: DotTileRows<2>(rn, x, ldx, w, ldw, c0, cl, a, R, pfx, pfw); break;
          default: DotTileRows<1>(rn, x, ldx, w, ldw, c0, cl, a, R, pfx, pfw); break;
        }
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < R; ++r) {
      const float* a = acc + (t * R + r) * kL;
      float s = 0;
      for (int l = 0; l < kL; ++l) s += a[l];  // same order as the portable version
      out[t * ldo + r] = s;
    }
  }
}

XHC_AVX512 void AxpyRowsAvx512(int nt, int R, int D, const float* A, int lda, const float* W,
                               size_t ldw, float* out, size_t ldo, bool accumulate) {
  for (int c0 = 0; c0 < D; c0 += kAxpyChunk) {
    const int cl = std::min(kAxpyChunk, D - c0);
    for (int t0 = 0; t0 < nt; t0 += 4) {
      const int tn = std::min(4, nt - t0);
      const float* a = A + t0 * lda;
      float* o = out + t0 * ldo + c0;
      const float* w = W + c0;
      switch (tn) {
        case 4: AxpyTile<4>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
        case 3: AxpyTile<3>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
        case 2: AxpyTile<2>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
        default: AxpyTile<1>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
      }
    }
  }
}

}  // namespace xhc::kernels::cpu::internal

#endif  // XHC_SKINNY_X86
