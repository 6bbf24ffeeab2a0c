// AVX2 + FMA versions of DotRows / AxpyRows (skinny_gemm.h), for CPUs without AVX-512 (here:
// AMD EPYC Zen 3). 8 lanes per partial sum; register tiles sized for 16 ymm registers:
// 12 accumulators + the 3 vectors one operand shares + 1 for the other operand.
// Compiled for AVX2 by function attribute (the build targets x86-64-v2); run only where the
// CPU has it (skinny_gemm_isa.h). Tuning measurements: PERF.md.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/skinny_gemm_kernels.h"

#ifdef XHC_SKINNY_X86
#include <immintrin.h>

#define XHC_AVX2 __attribute__((target("avx2,fma")))

namespace xhc::kernels::cpu::internal {
namespace {

constexpr int kL = 8;  // lanes of every partial sum
// Both products pack each column chunk of their strided operands into a contiguous buffer
// first. Why: the state's rows are D = N*C floats apart (64 KiB at N*C = 16384, 16 KiB for
// the 4096-wide maps), a multiple of the L1 way size (4 KiB) and, at 64 KiB, of the L2 one:
// the same column of all 16 X rows and 32 W rows falls in ONE cache set (8 ways), so
// unpacked the chunk that was meant to stay in L1 thrashed (measured: DotRows at 30 GFLOP/s
// whether X was in cache or streamed). Packing costs one load + store per element, which
// DotRows uses 16 (W) or 32 (X) times.
// DotRows column chunk: packed X (16 x 256) 16 KiB stays in L1 across the row groups, each
// group's 3 W rows (3 KiB) across the token groups; the 16 KiB of partial sums are loaded and
// stored once per tile and chunk, which at 128 columns cost ~10% (micro-benchmark: 128 ->
// 52, 256 -> 58, 512 -> 55 GFLOP/s with W prepacked).
constexpr int kDotChunk = 256;
constexpr int kMaxR = 32;  // DotRows partial sums of 16 tokens x 32 rows x 8 lanes = 16 KiB
// AxpyRows column chunk (a multiple of the 24-column tile): packed W chunk (32 rows) 24 KiB
// in L1, reused by the 4 token groups (micro-benchmark, streaming / cached: 96 -> 47 / 62,
// 192 -> 47 / 65, 384 -> 51 / 64 GFLOP/s; 384 did not help BackwardInput, PERF.md 12).
constexpr int kAxpyChunk = 192;
constexpr int kAxpyTileCols = 3 * kL;
// AxpyRows prefetches `out` this many floats ahead (2 tiles; 4 or 8 measured no better).
constexpr int kOutAhead = 2 * kAxpyTileCols;

// Lanes [0, n) on, n in 1..7: for maskload / maskstore of a ragged tail.
XHC_AVX2 inline __m256i TailMask(int n) {
  alignas(32) static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + kL - n));
}

// One step of 8 columns at column c of the packed chunks (row stride kDotChunk; unaligned
// loads: a SkinnyWeights vector is only float-aligned, and they cost nothing extra) for a
// TN x RN tile: W rows in registers, one X vector at
// a time (TN * RN FMAs for TN + RN loads).
template <int TN, int RN>
XHC_AVX2 inline void DotStep(const float* X, const float* W, int c, __m256 (&a)[TN][RN]) {
  __m256 w[RN];
  for (int j = 0; j < RN; ++j) w[j] = _mm256_loadu_ps(W + j * kDotChunk + c);
  for (int i = 0; i < TN; ++i) {
    const __m256 x = _mm256_loadu_ps(X + i * kDotChunk + c);
    for (int j = 0; j < RN; ++j) a[i][j] = _mm256_fmadd_ps(x, w[j], a[i][j]);
  }
}

// One TN x RN tile over the packed chunk's columns [0, cl), cl a multiple of 8 (the packed
// chunk is zero-padded): acc holds its (TN, RN) 8-lane partial sums (row stride R).
template <int TN, int RN>
XHC_AVX2 inline void DotTile(const float* X, const float* W, int cl, float* acc, int R) {
  __m256 a[TN][RN];
  for (int i = 0; i < TN; ++i)
    for (int j = 0; j < RN; ++j) a[i][j] = _mm256_load_ps(acc + (i * R + j) * kL);
  for (int c = 0; c < cl; c += kL) DotStep<TN, RN>(X, W, c, a);
  for (int i = 0; i < TN; ++i)
    for (int j = 0; j < RN; ++j) _mm256_store_ps(acc + (i * R + j) * kL, a[i][j]);
}

template <int RN>
XHC_AVX2 inline void DotTileTokens(int tn, const float* X, const float* W, int cl, float* acc,
                                   int R) {
  switch (tn) {
    case 4: DotTile<4, RN>(X, W, cl, acc, R); break;
    case 3: DotTile<3, RN>(X, W, cl, acc, R); break;
    case 2: DotTile<2, RN>(X, W, cl, acc, R); break;
    default: DotTile<1, RN>(X, W, cl, acc, R); break;
  }
}

// dst (rows, kChunk) = src rows [c0, c0 + cl), zero-padded to a multiple of 8 columns.
// The source rows are cache misses (L3 or memory) that the hardware prefetcher does not
// anticipate (short runs 64 KiB apart), and a plain memcpy (GCC: rep movsq) waited on them
// one row at a time (perf: half of DotRows). So each row's lines are requested kAhead rows
// early; kAhead stays below the 8 ways that the same column of all rows shares in L1.
template <int kChunk>
XHC_AVX2 inline void PackChunk(int rows, const float* src, size_t ld, int c0, int cl, float* dst) {
  constexpr int kAhead = 4;
  const int full = cl / kL * kL;
  for (int i = 0; i < std::min(kAhead, rows); ++i) {
    for (int c = 0; c < cl; c += 16) _mm_prefetch(reinterpret_cast<const char*>(src + i * ld + c0 + c), _MM_HINT_T0);
  }
  for (int i = 0; i < rows; ++i) {
    const float* s = src + i * ld + c0;
    float* d = dst + i * kChunk;
    if (i + kAhead < rows) {
      for (int c = 0; c < cl; c += 16) _mm_prefetch(reinterpret_cast<const char*>(s + kAhead * ld + c), _MM_HINT_T0);
    }
    for (int c = 0; c < full; c += kL) _mm256_storeu_ps(d + c, _mm256_loadu_ps(s + c));
    if (full < cl) _mm256_storeu_ps(d + full, _mm256_maskload_ps(s + full, TailMask(cl - full)));
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
  if (!kMasked) {  // out a few tiles ahead: its rows are 64 KiB apart, no prefetcher follows
    for (int i = 0; i < TN; ++i) {
      const float* p = out + i * ldo + kOutAhead;
      _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + CW * kL - 1), _MM_HINT_T0);
    }
  }
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

XHC_AVX2 inline void AxpyGroup(int tn, int R, int cl, const float* a, int lda, const float* w,
                               size_t ldw, float* o, size_t ldo, bool accumulate) {
  switch (tn) {
    case 4: AxpyTokens<4>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
    case 3: AxpyTokens<3>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
    case 2: AxpyTokens<2>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
    default: AxpyTokens<1>(R, cl, a, lda, w, ldw, o, ldo, accumulate); break;
  }
}

// AtXRows (weight gradients, out (R, D) = A^T . X over n tokens). Columns in chunks of
// kAtXChunk: the chunk's R x kAtXChunk running sums live in a contiguous buffer (out's rows
// are D floats apart, the cache-set aliasing of PackChunk's comment), the tokens walk the
// chunk in blocks of kAtXTokens whose X rows are packed first. Register tile: 4 rows x 24
// columns (12 accumulators, 3 X vectors, 1 broadcast A element), over the block's tokens in
// order: per element one FMA per token, t increasing, whatever the chunking.
// Micro-benchmark (skinny_gemm_bench, one thread, under load; GFLOP/s proj / maps), chunk x
// tokens: 192 x 16 51-54 / 51-53, 96 x 32 53-57, 96 x 64 53-58, 384 x 16 41-47, 768 x 8 40-54,
// 192 x 64 28-55 (noisy), 144 x 48 53-60, 192 x 32 55-59; OpenBLAS 512-column blocks 32-57.
constexpr int kAtXChunk = 192;
constexpr int kAtXTokens = 32;

// xp (kt, kAtXChunk) = X rows [0, kt), columns [0, cl), zero-padded to a multiple of 8; row
// i + kAhead (which may lie in the next block, up to `rows_left`) is prefetched as row i is
// copied, so the stream over the tokens does not stall at block starts.
XHC_AVX2 inline void PackAtX(int kt, int rows_left, const float* X, size_t ldx, int cl, float* xp) {
  constexpr int kAhead = 4;
  const int full = cl / kL * kL;
  for (int i = 0; i < kt; ++i) {
    const float* s = X + i * ldx;
    if (i + kAhead < rows_left) {
      for (int c = 0; c < cl; c += 16) _mm_prefetch(reinterpret_cast<const char*>(s + kAhead * ldx + c), _MM_HINT_T0);
    }
    float* d = xp + i * kAtXChunk;
    for (int c = 0; c < full; c += kL) _mm256_store_ps(d + c, _mm256_loadu_ps(s + c));
    if (full < cl) _mm256_store_ps(d + full, _mm256_maskload_ps(s + full, TailMask(cl - full)));
  }
}

// Requests rows [r0, r1) of src (row stride ld), columns [0, cl), into L1.
XHC_AVX2 inline void PrefetchRows(const float* src, size_t ld, int cl, int r0, int r1) {
  for (int i = r0; i < r1; ++i) {
    for (int c = 0; c < cl; c += 16) _mm_prefetch(reinterpret_cast<const char*>(src + i * ld + c), _MM_HINT_T0);
  }
}

// RN rows x CW vectors of the chunk's sums (row stride kAtXChunk) += the kt tokens of xp.
template <int RN, int CW>
XHC_AVX2 inline void AtXTile(int kt, const float* A, int lda, const float* xp, float* acc) {
  __m256 a[RN][CW];
  for (int j = 0; j < RN; ++j)
    for (int v = 0; v < CW; ++v) a[j][v] = _mm256_load_ps(acc + j * kAtXChunk + v * kL);
  for (int t = 0; t < kt; ++t) {
    __m256 x[CW];
    for (int v = 0; v < CW; ++v) x[v] = _mm256_load_ps(xp + t * kAtXChunk + v * kL);
    for (int j = 0; j < RN; ++j) {
      const __m256 s = _mm256_broadcast_ss(A + t * lda + j);
      for (int v = 0; v < CW; ++v) a[j][v] = _mm256_fmadd_ps(s, x[v], a[j][v]);
    }
  }
  for (int j = 0; j < RN; ++j)
    for (int v = 0; v < CW; ++v) _mm256_store_ps(acc + j * kAtXChunk + v * kL, a[j][v]);
}

template <int RN>
XHC_AVX2 inline void AtXRowGroup(int kt, int padded, const float* A, int lda, const float* xp,
                                 float* acc) {
  int c = 0;
  for (; c + 3 * kL <= padded; c += 3 * kL) AtXTile<RN, 3>(kt, A, lda, xp + c, acc + c);
  for (; c < padded; c += kL) AtXTile<RN, 1>(kt, A, lda, xp + c, acc + c);
}

}  // namespace

namespace {

// DotRows for at most kMaxR rows. wpk: W prepacked by PackDotRowsAvx2 (chunk k's rows at
// wpk + k * chunk_stride, row stride kDotChunk), or nullptr: pack each chunk of W here.
XHC_AVX2 void DotRowsGroup(int nt, int R, int D, const float* X, size_t ldx, const float* W,
                           size_t ldw, const float* wpk, size_t chunk_stride, float* out,
                           int ldo) {
  alignas(32) float acc[kMaxTokens * kMaxR * kL];
  alignas(64) float xp[kMaxTokens * kDotChunk], wp[kMaxR * kDotChunk];
  std::memset(acc, 0, sizeof(float) * nt * R * kL);
  for (int c0 = 0, k = 0; c0 < D; c0 += kDotChunk, ++k) {
    const int cl = std::min(kDotChunk, D - c0);
    PackChunk<kDotChunk>(nt, X, ldx, c0, cl, xp);
    const float* wc = wpk ? wpk + k * chunk_stride : wp;
    if (!wpk) PackChunk<kDotChunk>(R, W, ldw, c0, cl, wp);
    const int padded = (cl + kL - 1) / kL * kL;  // the zero columns add +0 to every sum
    // The next chunk's X rows are requested while this one computes, a share per row group,
    // so its pack finds them in cache (the pack's own look-ahead is 4 rows, far shorter than
    // the miss latency of rows N*C floats apart: PERF.md 30).
    const int next_cl = std::min(kDotChunk, D - c0 - kDotChunk);
    const int groups = (R + 2) / 3, per_group = (nt + groups - 1) / groups;
    // Row groups outer: a group's 3 W rows are reused by all 4 token groups.
    for (int r0 = 0, g = 0; r0 < R; r0 += 3, ++g) {
      const int rn = std::min(3, R - r0);
      if (next_cl > 0) {
        PrefetchRows(X + c0 + kDotChunk, ldx, next_cl, std::min(nt, g * per_group),
                     std::min(nt, (g + 1) * per_group));
      }
      const float* w = wc + r0 * kDotChunk;
      for (int t0 = 0; t0 < nt; t0 += 4) {
        const int tn = std::min(4, nt - t0);
        const float* x = xp + t0 * kDotChunk;
        float* a = acc + (t0 * R + r0) * kL;
        switch (rn) {
          case 3: DotTileTokens<3>(tn, x, w, padded, a, R); break;
          case 2: DotTileTokens<2>(tn, x, w, padded, a, R); break;
          default: DotTileTokens<1>(tn, x, w, padded, a, R); break;
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

size_t NumChunks(int D, int chunk) { return (D + chunk - 1) / chunk; }

}  // namespace

XHC_AVX2 void DotRowsAvx2(int nt, int R, int D, const float* X, size_t ldx, const float* W,
                          size_t ldw, float* out, int ldo) {
  for (int r0 = 0; r0 < R; r0 += kMaxR) {  // rows in groups of 32: each output's sum unchanged
    DotRowsGroup(nt, std::min(kMaxR, R - r0), D, X, ldx, W + r0 * ldw, ldw, nullptr, 0,
                 out + r0, ldo);
  }
}

// Layout: chunk k (kDotChunk columns, zero-padded to a multiple of 8) of all R rows at
// k * R * kDotChunk, row stride kDotChunk.
XHC_AVX2 void PackDotRowsAvx2(int R, int D, const float* W, size_t ldw, PackedBuffer* packed) {
  const size_t stride = static_cast<size_t>(R) * kDotChunk;
  packed->assign(NumChunks(D, kDotChunk) * stride, 0.0f);
  for (int c0 = 0, k = 0; c0 < D; c0 += kDotChunk, ++k) {
    PackChunk<kDotChunk>(R, W, ldw, c0, std::min(kDotChunk, D - c0), packed->data() + k * stride);
  }
}

XHC_AVX2 void DotRowsAvx2Packed(int nt, int R, int D, const float* X, size_t ldx,
                                const float* packed, float* out, int ldo) {
  const size_t stride = static_cast<size_t>(R) * kDotChunk;
  for (int r0 = 0; r0 < R; r0 += kMaxR) {
    DotRowsGroup(nt, std::min(kMaxR, R - r0), D, X, ldx, nullptr, 0, packed + r0 * kDotChunk,
                 stride, out + r0, ldo);
  }
}

// W is packed per call, chunk by chunk (a prepacked W, as for DotRows, measured slower here:
// PERF.md, 11).
XHC_AVX2 void AxpyRowsAvx2(int nt, int R, int D, const float* A, int lda, const float* W,
                           size_t ldw, float* out, size_t ldo, bool accumulate) {
  constexpr int kMaxR = 64;  // packed W chunk (stack) 48 KiB at most
  alignas(64) float wp[kMaxR * kAxpyChunk];
  for (int c0 = 0; c0 < D; c0 += kAxpyChunk) {
    const int cl = std::min(kAxpyChunk, D - c0);
    const float* wc = W + c0;
    size_t ld = ldw;
    if (R <= kMaxR) {  // taller W (no call site has one): read in place, the same sums
      PackChunk<kAxpyChunk>(R, W, ldw, c0, cl, wp);
      wc = wp, ld = kAxpyChunk;
    }
    for (int t0 = 0; t0 < nt; t0 += 4) {
      AxpyGroup(std::min(4, nt - t0), R, cl, A + t0 * lda, lda, wc, ld, out + t0 * ldo + c0, ldo,
                accumulate);
    }
  }
}

XHC_AVX2 void AtXRowsAvx2(int n, int R, int D, const float* A, int lda, const float* X,
                          size_t ldx, float* out, size_t ldo) {
  thread_local std::vector<float, CacheLineAllocator<float>> acc_s;
  acc_s.resize(static_cast<size_t>(R) * kAtXChunk);
  float* acc = acc_s.data();
  alignas(64) float xp[kAtXTokens * kAtXChunk];
  for (int c0 = 0; c0 < D; c0 += kAtXChunk) {
    const int cl = std::min(kAtXChunk, D - c0);
    const int padded = (cl + kL - 1) / kL * kL;  // zero columns: sums of +0, never stored
    for (int r = 0; r < R; ++r) std::memset(acc + r * kAtXChunk, 0, sizeof(float) * padded);
    for (int t0 = 0; t0 < n; t0 += kAtXTokens) {
      const int kt = std::min(kAtXTokens, n - t0);
      PackAtX(kt, n - t0, X + t0 * ldx + c0, ldx, cl, xp);
      const float* a = A + static_cast<size_t>(t0) * lda;
      // The next block's rows (or the next chunk's first block) are requested while this one
      // computes, a share per row group, so PackAtX finds them in cache instead of waiting on
      // each short run (its rows are N*C floats apart: no hardware prefetcher follows them).
      const float* next = t0 + kt < n ? X + (t0 + kt) * ldx + c0
                          : c0 + kAtXChunk < D ? X + c0 + kAtXChunk : nullptr;
      const int next_rows = t0 + kt < n ? std::min(kAtXTokens, n - t0 - kt) : std::min(kAtXTokens, n);
      const int next_cl = t0 + kt < n ? cl : std::min(kAtXChunk, D - c0 - kAtXChunk);
      const int groups = (R + 3) / 4, per_group = (next_rows + groups - 1) / groups;
      int r0 = 0;
      for (int g = 0; r0 + 4 <= R; r0 += 4, ++g) {
        if (next) PrefetchRows(next, ldx, next_cl, g * per_group, std::min(next_rows, (g + 1) * per_group));
        AtXRowGroup<4>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk);
      }
      if (next && r0 < R) {
        PrefetchRows(next, ldx, next_cl, (groups - 1) * per_group, next_rows);
      }
      switch (R - r0) {
        case 3: AtXRowGroup<3>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk); break;
        case 2: AtXRowGroup<2>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk); break;
        case 1: AtXRowGroup<1>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk); break;
        default: break;
      }
    }
    for (int r = 0; r < R; ++r) std::memcpy(out + r * ldo + c0, acc + r * kAtXChunk, sizeof(float) * cl);
  }
}

}  // namespace xhc::kernels::cpu::internal

#endif  // XHC_SKINNY_X86
