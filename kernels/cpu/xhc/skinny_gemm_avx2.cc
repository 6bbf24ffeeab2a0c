// AVX2 + FMA versions of DotRows / AxpyRows (skinny_gemm.h), for CPUs without AVX-512 (here:
// AMD EPYC Zen 3). 8 lanes per partial sum; register tiles sized for 16 ymm registers:
// 12 accumulators + the 3 vectors one operand shares + 1 for the other operand.
// Compiled for AVX2 by function attribute (the build targets x86-64-v2); run only where the
// CPU has it (skinny_gemm_isa.h). Tuning measurements: PERF.md.

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/skinny_gemm_kernels.h"

#ifdef XHC_SKINNY_X86
#include <immintrin.h>

#define XHC_AVX2 __attribute__((target("avx2,fma")))

namespace xhc::kernels::cpu::internal {
namespace {

constexpr int kL = 8;  // lanes of every partial sum
// DotRows column chunk: X chunk (16 tokens) 16 KiB + the 3 W rows of a tile 3 KiB stay in
// L1 (32 KiB) while all row groups run over the chunk.
constexpr int kDotChunk = 256;
constexpr int kMaxR = 32;  // DotRows partial sums of 16 tokens x 32 rows x 8 lanes = 16 KiB
// AxpyRows column chunk (a multiple of the 24-column tile): W chunk (32 rows) 24 KiB in L1,
// reused by the 4 token groups.
constexpr int kAxpyChunk = 192;
constexpr int kAxpyTileCols = 3 * kL;

// Lanes [0, n) on, n in 1..7: for maskload / maskstore of a ragged tail.
XHC_AVX2 inline __m256i TailMask(int n) {
  alignas(32) static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + kL - n));
}

// One step of 8 columns at column c for a TN x RN tile: W rows in registers, one X vector at
// a time (TN * RN FMAs for TN + RN loads).
template <int TN, int RN, bool kMasked>
XHC_AVX2 inline void DotStep(const float* X, size_t ldx, const float* W, size_t ldw, int c,
                             __m256i mask, __m256 (&a)[TN][RN]) {
  __m256 w[RN];
  for (int j = 0; j < RN; ++j) {
    w[j] = kMasked ? _mm256_maskload_ps(W + j * ldw + c, mask) : _mm256_loadu_ps(W + j * ldw + c);
  }
  for (int i = 0; i < TN; ++i) {
    const __m256 x =
        kMasked ? _mm256_maskload_ps(X + i * ldx + c, mask) : _mm256_loadu_ps(X + i * ldx + c);
    for (int j = 0; j < RN; ++j) a[i][j] = _mm256_fmadd_ps(x, w[j], a[i][j]);
  }
}

// One TN x RN tile over columns [c0, c0 + cl): acc holds its (TN, RN) 8-lane partial sums
// (row stride R). pfx / pfw (nullable): the same tokens' / rows' next chunk, prefetched while
// this one is computed (the rows are 64 KiB apart, which the hardware prefetcher follows
// poorly).
template <int TN, int RN>
XHC_AVX2 inline void DotTile(const float* X, size_t ldx, const float* W, size_t ldw, int c0,
                             int cl, float* acc, int R, const float* pfx, const float* pfw) {
  __m256 a[TN][RN];
  for (int i = 0; i < TN; ++i)
    for (int j = 0; j < RN; ++j) a[i][j] = _mm256_load_ps(acc + (i * R + j) * kL);
  const __m256i none = _mm256_setzero_si256();
  int c = 0;
  for (; c + 2 * kL <= cl; c += 2 * kL) {  // one 64-byte line per row and step pair
    if (pfx) {
      for (int i = 0; i < TN; ++i) _mm_prefetch(reinterpret_cast<const char*>(pfx + i * ldx + c), _MM_HINT_T0);
    }
    if (pfw) {
      for (int j = 0; j < RN; ++j) _mm_prefetch(reinterpret_cast<const char*>(pfw + j * ldw + c), _MM_HINT_T0);
    }
    DotStep<TN, RN, false>(X, ldx, W, ldw, c0 + c, none, a);
    DotStep<TN, RN, false>(X, ldx, W, ldw, c0 + c + kL, none, a);
  }
  if (c + kL <= cl) DotStep<TN, RN, false>(X, ldx, W, ldw, c0 + c, none, a), c += kL;
  if (c < cl) DotStep<TN, RN, true>(X, ldx, W, ldw, c0 + c, TailMask(cl - c), a);
  for (int i = 0; i < TN; ++i)
    for (int j = 0; j < RN; ++j) _mm256_store_ps(acc + (i * R + j) * kL, a[i][j]);
}

template <int RN>
XHC_AVX2 inline void DotTileTokens(int tn, const float* X, size_t ldx, const float* W,
                                   size_t ldw, int c0, int cl, float* acc, int R,
                                   const float* pfx, const float* pfw) {
  switch (tn) {
    case 4: DotTile<4, RN>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
    case 3: DotTile<3, RN>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
    case 2: DotTile<2, RN>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
    default: DotTile<1, RN>(X, ldx, W, ldw, c0, cl, acc, R, pfx, pfw); break;
  }
}

// TN tokens x (CW vectors of 8 columns, the last masked when kMasked): out (+)= A . W over all
// R rows, W vectors in registers, one broadcast A element at a time.
template <int TN, int CW, bool kMasked>
XHC_AVX2 inline void AxpyTile(int R, const float* A, int lda, const float* W, size_t ldw,
                              float* out, size_t ldo, bool accumulate, __m256i mask) {
  __m256 a[TN][CW];
  for (int i = 0; i < TN; ++i)
    for (int v = 0; v < CW; ++v) a[i][v] = _mm256_setzero_ps();
  for (int r = 0; r < R; ++r) {
    __m256 w[CW];
    for (int v = 0; v < CW; ++v) {
      const float* p = W + r * ldw + v * kL;
      w[v] = kMasked && v == CW - 1 ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
    }
    for (int i = 0; i < TN; ++i) {
      const __m256 s = _mm256_broadcast_ss(A + i * lda + r);
      for (int v = 0; v < CW; ++v) a[i][v] = _mm256_fmadd_ps(s, w[v], a[i][v]);
    }
  }
  for (int i = 0; i < TN; ++i) {
    for (int v = 0; v < CW; ++v) {
      float* o = out + i * ldo + v * kL;
      const bool masked = kMasked && v == CW - 1;
      if (accumulate) {
        a[i][v] = _mm256_add_ps(masked ? _mm256_maskload_ps(o, mask) : _mm256_loadu_ps(o), a[i][v]);
      }
      if (masked) {
        _mm256_maskstore_ps(o, mask, a[i][v]);
      } else {
        _mm256_storeu_ps(o, a[i][v]);
      }
    }
  }
}

// Columns [0, cl) of TN tokens: 24-column tiles, then 8-column ones, then a masked tail.
template <int TN>
XHC_AVX2 inline void AxpyTokens(int R, int cl, const float* A, int lda, const float* W,
                                size_t ldw, float* out, size_t ldo, bool accumulate) {
  const __m256i none = _mm256_setzero_si256();
  int c = 0;
  for (; c + kAxpyTileCols <= cl; c += kAxpyTileCols) {
    AxpyTile<TN, 3, false>(R, A, lda, W + c, ldw, out + c, ldo, accumulate, none);
  }
  for (; c + kL <= cl; c += kL) AxpyTile<TN, 1, false>(R, A, lda, W + c, ldw, out + c, ldo, accumulate, none);
  if (c < cl) AxpyTile<TN, 1, true>(R, A, lda, W + c, ldw, out + c, ldo, accumulate, TailMask(cl - c));
}

}  // namespace

XHC_AVX2 void DotRowsAvx2(int nt, int R, int D, const float* X, size_t ldx, const float* W,
                          size_t ldw, float* out, int ldo) {
  if (R > kMaxR) {  // rows in groups of 32 (each output's reduction is unchanged)
    for (int r0 = 0; r0 < R; r0 += kMaxR) {
      DotRowsAvx2(nt, std::min(kMaxR, R - r0), D, X, ldx, W + r0 * ldw, ldw, out + r0, ldo);
    }
    return;
  }
  alignas(32) float acc[kMaxTokens * kMaxR * kL];
  std::memset(acc, 0, sizeof(float) * nt * R * kL);
  for (int c0 = 0; c0 < D; c0 += kDotChunk) {
    const int cl = std::min(kDotChunk, D - c0);
    const bool next = c0 + 2 * kDotChunk <= D;  // prefetch only whole next chunks
    // Row groups outer: a group's 3 W rows stay in registers' reach (L1) for all 4 token
    // groups, and the X chunk stays in L1 across the row groups.
    for (int r0 = 0; r0 < R; r0 += 3) {
      const int rn = std::min(3, R - r0);
      const float* w = W + r0 * ldw;
      for (int t0 = 0; t0 < nt; t0 += 4) {
        const int tn = std::min(4, nt - t0);
        const float* x = X + t0 * ldx;
        float* a = acc + (t0 * R + r0) * kL;
        const float* pfx = next && r0 == 0 ? x + c0 + kDotChunk : nullptr;
        const float* pfw = next && t0 == 0 ? w + c0 + kDotChunk : nullptr;
        switch (rn) {
          case 3: DotTileTokens<3>(tn, x, ldx, w, ldw, c0, cl, a, R, pfx, pfw); break;
          case 2: DotTileTokens<2>(tn, x, ldx, w, ldw, c0, cl, a, R, pfx, pfw); break;
          default: DotTileTokens<1>(tn, x, ldx, w, ldw, c0, cl, a, R, pfx, pfw); break;
        }
      }
    }
  }
  for (int t = 0; t < nt; ++t) {
    for (int r = 0; r < R; ++r) {
      const float* a = acc + (t * R + r) * kL;
      float s = 0;
      for (int l = 0; l < kL; ++l) s += a[l];  // fixed order: lane 0 first
      out[t * ldo + r] = s;
    }
  }
}

XHC_AVX2 void AxpyRowsAvx2(int nt, int R, int D, const float* A, int lda, const float* W,
                           size_t ldw, float* out, size_t ldo, bool accumulate) {
  for (int c0 = 0; c0 < D; c0 += kAxpyChunk) {
    const int cl = std::min(kAxpyChunk, D - c0);
    for (int t0 = 0; t0 < nt; t0 += 4) {
      const int tn = std::min(4, nt - t0);
      const float* a = A + t0 * lda;
      float* o = out + t0 * ldo + c0;
      const float* w = W + c0;
      switch (tn) {
        case 4: AxpyTokens<4>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
        case 3: AxpyTokens<3>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
        case 2: AxpyTokens<2>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
        default: AxpyTokens<1>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
      }
    }
  }
}

}  // namespace xhc::kernels::cpu::internal

#endif  // XHC_SKINNY_X86
