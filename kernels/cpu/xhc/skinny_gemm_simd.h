#ifndef XHC_KERNELS_CPU_XHC_SKINNY_GEMM_SIMD_H_
#define XHC_KERNELS_CPU_XHC_SKINNY_GEMM_SIMD_H_

// The vector versions of DotRows / AxpyRows / AtXRows (skinny_gemm.h), written once over a
// vector type S and compiled once per path: skinny_gemm_avx2.cc (S = 8-lane __m256) and
// skinny_gemm_avx512.cc (S = 16-lane __m512), each under its own target pragma (GCC's, or
// clang's in the fuzz build; the build targets x86-64-v2), so each TU gets its own copy of
// everything here (unnamed namespace). S provides: V, kL (lanes), Zero, Load
// (unaligned), LoadA / StoreA (aligned to the vector), Store, Bcast (one float to every lane),
// Fma (a * b + c), Add, Mask, TailMask(n) (lanes [0, n) on, 0 < n < kL), LoadMasked (others
// zero), StoreMasked, Prefetch (to L1), PrefetchL2, Pin (the value itself, opaque to the
// compiler: a vector that several FMAs share is loaded once into a register instead of being
// folded into each FMA as a memory operand, which GCC does and which made the tiles
// load-bound: docs/design/skinny-gemm-and-isa-dispatch.md).
//
// Register tiles are sized for 16 registers (AVX2's ymm count: 12 accumulators + the 3
// vectors one operand shares + 1 for the other); AVX-512 has 32 but the same 12
// accumulators already cover its FMA latency (2 pipes x 4 cycles), so it keeps the tiles
// with twice the columns per vector. Tuning measurements:
// docs/design/skinny-gemm-and-isa-dispatch.md.
//
// Sums: a DotRows output is runs of kDotRun columns added in order (below); AxpyRows' sum
// over r is r = 0, 1, ... from zero, then added to out; AtXRows' elements are one running sum
// over t. All with FMA and independent of the vector width, so avx2 and avx512 agree bit for
// bit in all three (the generic path, skinny_gemm.cc, sums DotRows in lanes: other last bits).

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/xhc/skinny_gemm.h"

// Every loop over a tile's rows, tokens or vectors is unrolled completely, so the tile's
// accumulators live in registers: GCC 12 leaves some of these loops rolled (the AVX-512
// AxpyTile even at the library's -O3), and with its token loop rolled a tile runs as a 1-token
// tile over each token in turn, W re-read per token (docs/design/skinny-gemm-and-isa-dispatch.md).
#define XHC_UNROLL _Pragma("GCC unroll 16")
// A lambda body inlined into its caller (the tile's accumulators stay in registers).
#define XHC_ALWAYS_INLINE __attribute__((always_inline))

namespace xhc::kernels::cpu::internal {
namespace {

// AxpyRows and AtXRows pack each column chunk of their strided operand (W, X) into a
// contiguous buffer first. Why: the state's rows are D = N*C floats apart (64 KiB at N*C =
// 16384, 16 KiB for the 4096-wide maps), a multiple of the L1 way size (4 KiB) and, at 64 KiB,
// of the L2 one: the same column of all 16 X rows and 32 W rows falls in ONE cache set (8
// ways), so unpacked the chunk that is meant to stay in L1 thrashes (measured on AVX2: an
// unpacked DotRows ran at 30 GFLOP/s whether X was in cache or streamed). Packing costs one
// load + store per element, which the product then uses many times. DotRows packs only W
// (transposed): it reads X's rows in place, each in order, below.
// AxpyRows column chunk (a multiple of the 3-vector tile at both widths): packed W chunk (32
// rows) 24 KiB in L1, reused by the 4 token groups (AVX2 micro-benchmark, streaming / cached:
// 96 -> 47 / 62, 192 -> 47 / 65, 384 -> 51 / 64 GFLOP/s; 384 did not help BackwardInput,
// whose dX block is warm: docs/design/skinny-gemm-and-isa-dispatch.md).
constexpr int kAxpyChunk = 192;
constexpr int kAxpyMaxR = 64;  // packed W chunk (stack) 48 KiB at most
// AtXRows column chunk and token block (AVX2 micro-benchmark, one thread, under load; GFLOP/s
// proj / maps), chunk x tokens: 192 x 16 51-54 / 51-53, 96 x 32 53-57, 96 x 64 53-58, 384 x
// 16 41-47, 768 x 8 40-54, 192 x 64 28-55 (noisy), 144 x 48 53-60, 192 x 32 55-59; OpenBLAS
// 512-column blocks 32-57.
constexpr int kAtXChunk = 192;
constexpr int kAtXTokens = 32;

template <class S>
inline int PadToLanes(int n) {
  return (n + S::kL - 1) / S::kL * S::kL;
}

// Requests rows [r0, r1) of src (row stride ld), columns [0, cl), into L1 (L2 if l2).
template <class S>
inline void PrefetchRows(const float* src, size_t ld, int cl, int r0, int r1, bool l2 = false) {
  for (int i = r0; i < r1; ++i) {
    for (int c = 0; c < cl; c += 16) {
      if (l2) {
        S::PrefetchL2(src + i * ld + c);
      } else {
        S::Prefetch(src + i * ld + c);
      }
    }
  }
}

// dst row i (stride kDst) = src row i (stride ld), columns [0, cl), zero-padded to a
// multiple of kL; aligned stores when dst rows are vector-aligned. The source rows are cache
// misses (L3 or memory) that the hardware prefetcher does not anticipate (short runs 64 KiB
// apart), and a plain memcpy (GCC: rep movsq) waited on them one row at a time (perf: half of
// DotRows on AVX2). So row i + kAhead is requested as row i is copied (kAhead stays below the
// 8 ways that the same column of all rows shares in L1); rows up to `rows_left` may be
// requested (the caller's next block), and the first kAhead rows first when `lead_in`.
template <class S, int kDst>
inline void PackRows(int rows, int rows_left, bool lead_in, const float* src, size_t ld, int cl,
                     float* dst) {
  constexpr int kAhead = 4;
  if (lead_in) PrefetchRows<S>(src, ld, cl, 0, std::min(kAhead, rows));
  const int full = cl / S::kL * S::kL;
  for (int i = 0; i < rows; ++i) {
    const float* s = src + i * ld;
    if (i + kAhead < rows_left) PrefetchRows<S>(s, ld, cl, kAhead, kAhead + 1);
    float* d = dst + i * kDst;
    for (int c = 0; c < full; c += S::kL) S::StoreA(d + c, S::Load(s + c));
    if (full < cl) S::StoreA(d + full, S::LoadMasked(s + full, S::TailMask(cl - full)));
  }
}

// DotRows by broadcasts. The outputs' rows are the vector lanes: W is packed transposed in passes
// of P = DotPassRows() = 2 kL rows (pass p's element (c, r) at p * D * P + c * P + r, rows past R
// zero), and a tile of TN tokens keeps TN x RV accumulators (RV = 1 to DotMaxVectors,
// DotRowsBcastPacked) while it walks kDotRun columns: per column RV loads of W and TN broadcasts of
// X for TN * RV FMAs, X's rows read in place, in order (no packing, no lane reductions). Tiles that
// split each output over the lanes (X and W packed per column chunk, a lane reduction per output)
// stayed at ~0.55 of the FMA peak, on AVX-512 (Zen 5) and on AVX2 (Zen 3):
// docs/design/skinny-gemm-and-isa-dispatch.md.
// Sums: each output is runs of kDotRun terms (c increasing, FMA from zero), the runs added in
// order; so it depends neither on the tile, block or thread nor on the vector width.
constexpr int kDotRun = 512;  // a run's W rows (64 KiB) are read by every tile of the block

template <class S>
constexpr int DotPassRows() {
  return 2 * S::kL;
}

// Vectors of rows one walk over X takes at most, and the tokens of an RV-vector tile: with 32
// registers (kL = 16) 8 tokens for any RV (8-24 accumulators); with 16 (AVX2) 12
// accumulators and RV + 1 registers for W and the broadcast, in walks of at most 2 vectors
// (6 tokens): per column 2 W loads and 6 broadcasts for 12 FMAs, and each run of W read by
// half as many tiles as 4-vector walks of 3 tokens (whose 16-token blocks also ended in a
// 1-token tile).
// A tile's tokens are the X rows it reads at once: 16 of them (RV = 1, rows <= 16, as the
// head's readout has) ran at 0.6 of 8's rate on Zen 4. Measurements of both choices:
// docs/design/skinny-gemm-and-isa-dispatch.md.
template <class S>
constexpr int DotMaxVectors() {
  return S::kL == 16 ? 3 : 2;
}
template <class S, int RV>
constexpr int DotTileTokens() {
  if constexpr (S::kL == 16) return 8;
  return 12 / RV;
}

// Columns [c0, c1) of TN tokens against RV vectors of packed rows from Wt on (vector v: pass
// v / 2, half v % 2; a 3-vector tile spans two passes): tot (TN x RV vectors) += the run's sums.
template <class S, int RV, int TN>
inline void DotRunTile(int c0, int c1, int D, const float* X, size_t ldx, const float* Wt,
                       float* tot, bool prefetch) {
  using V = typename S::V;
  constexpr int kW = DotPassRows<S>();
  // Every vector of W held in a register (RV <= 3; DotMaxVectors).
  constexpr int kPinned = RV;
  V a[TN][RV];
  XHC_UNROLL
  for (int i = 0; i < TN; ++i) {
    XHC_UNROLL
    for (int v = 0; v < RV; ++v) a[i][v] = S::Zero();
  }
  // One column: RV loads of W, TN broadcasts of X, TN x RV FMAs.
  auto column = [&](int c) XHC_ALWAYS_INLINE {
    V w[RV];
    XHC_UNROLL
    for (int v = 0; v < RV; ++v) {
      const size_t pass = static_cast<size_t>(v / 2) * D * kW;
      const V wv = S::LoadA(Wt + pass + static_cast<size_t>(c) * kW + (v % 2) * S::kL);
      w[v] = v < kPinned ? S::Pin(wv) : wv;
    }
    XHC_UNROLL
    for (int i = 0; i < TN; ++i) {
      const V x = S::Bcast(X + i * ldx + c);
      XHC_UNROLL
      for (int v = 0; v < RV; ++v) a[i][v] = S::Fma(x, w[v], a[i][v]);
    }
  };
  if (!prefetch) {
    for (int c = c0; c < c1; ++c) column(c);
  } else {
    // The tile's rows of the next run requested, one line each per 16 columns of this run
    // (the run's first walk reads X from memory; docs/design/skinny-gemm-and-isa-dispatch.md).
    for (int c = c0; c < c1;) {
      XHC_UNROLL
      for (int i = 0; i < TN; ++i) S::Prefetch(X + i * ldx + c + kDotRun);
      for (const int ce = std::min(c1, c + 16); c < ce; ++c) column(c);
    }
  }
  XHC_UNROLL
  for (int i = 0; i < TN; ++i) {
    XHC_UNROLL
    for (int v = 0; v < RV; ++v) {
      float* t = tot + (i * RV + v) * S::kL;
      S::StoreA(t, S::Add(S::LoadA(t), a[i][v]));
    }
  }
}

// Tokens [0, tn) of a run, tn <= kTile, in tiles of kTile tokens (the last one shorter).
template <class S, int RV, int kTile>
inline void DotRunTokens(int tn, int c0, int c1, int D, const float* X, size_t ldx, const float* Wt,
                         float* tot, bool prefetch) {
  if constexpr (kTile > 1) {
    if (tn < kTile) {
      return DotRunTokens<S, RV, kTile - 1>(tn, c0, c1, D, X, ldx, Wt, tot, prefetch);
    }
  }
  DotRunTile<S, RV, kTile>(c0, c1, D, X, ldx, Wt, tot, prefetch);
}

// One run [c0, c1) of X's rows for nt <= kMaxTokens against RV vectors of packed rows from
// Wt on, in tiles of DotTileTokens tokens: tot (nt x RV vectors) += the run's sums.
template <class S, int RV>
void DotBcastRun(int nt, int c0, int c1, int D, const float* X, size_t ldx, const float* Wt,
                 float* tot, bool prefetch) {
  constexpr int kTile = DotTileTokens<S, RV>();
  for (int t0 = 0; t0 < nt; t0 += kTile) {
    DotRunTokens<S, RV, kTile>(std::min(kTile, nt - t0), c0, c1, D, X + t0 * ldx, ldx, Wt,
                               tot + t0 * RV * S::kL, prefetch);
  }
}

// The walks over X that rows [0, R) of a group take, f(r0, rv, rows) for each: each starts on
// a packed pass and takes rv vectors, up to DotMaxVectors; on AVX-512 the last 3 vectors in
// one walk (spanning a pass and half the next), 2 (one pass) while more remain, so xhc_flash's
// 80 rows are 32 + 48 there (no 1-vector walk, docs/design/flash-window.md), and five 16-row
// walks on AVX2.
template <class S, class F>
inline void ForEachDotWalk(int R, F f) {
  constexpr int kMaxV = DotMaxVectors<S>();
  for (int r0 = 0; r0 < R;) {
    const int vectors = (R - r0 + S::kL - 1) / S::kL;
    const int rv = vectors <= kMaxV ? vectors : 2;
    const int rows = std::min(rv * S::kL, R - r0);
    f(r0, rv, rows);
    r0 += rows;
  }
}

// Rows in groups of kDotGroupRows; within a group, runs outer and walks inner, so a run of
// the block's X rows (16 x 512 floats) is read from memory once and stays in cache for the
// group's other walks (walks outer read the whole 512 KiB block again per walk: xhc_flash's
// 80-row entry projection took 3). A walk's sums sit at tot + nt * r0 (token stride rv * kL).
constexpr int kDotGroupRows = 128;

template <class S>
void DotRowsBcastPacked(int nt, int R, int D, const float* X, size_t ldx, const float* packed,
                        float* out, int ldo) {
  for (int g0 = 0; g0 < R; g0 += kDotGroupRows) {
    const int gr = std::min(kDotGroupRows, R - g0);
    alignas(64) float tot[kMaxTokens * kDotGroupRows];
    std::memset(tot, 0, sizeof(float) * nt * PadToLanes<S>(gr));
    const float* wg = packed + static_cast<size_t>(g0) * D;  // g0: a multiple of the passes
    for (int c0 = 0; c0 < D; c0 += kDotRun) {
      const int c1 = std::min(D, c0 + kDotRun);
      ForEachDotWalk<S>(gr, [&](int r0, int rv, int) {
        const float* wt = wg + static_cast<size_t>(r0) * D;  // pass r0 / DotPassRows
        float* t = tot + nt * r0;
        // The run's first walk reads its X from memory; it requests the next run's.
        const bool pf = g0 == 0 && r0 == 0 && c1 < D;
        switch (rv) {
          case 3: DotBcastRun<S, 3>(nt, c0, c1, D, X, ldx, wt, t, pf); break;
          case 2: DotBcastRun<S, 2>(nt, c0, c1, D, X, ldx, wt, t, pf); break;
          default: DotBcastRun<S, 1>(nt, c0, c1, D, X, ldx, wt, t, pf); break;
        }
      });
    }
    ForEachDotWalk<S>(gr, [&](int r0, int rv, int rows) {
      for (int t = 0; t < nt; ++t) {
        std::memcpy(out + t * ldo + g0 + r0, tot + nt * r0 + t * rv * S::kL, sizeof(float) * rows);
      }
    });
  }
}

// In column blocks: a pass's block of kPackCols columns (kPackCols x kW floats, 4 KiB on
// AVX2) stays in L1 while each of its rows is written into it. Row by row over all D columns
// every store would go to a new line (kW floats apart) of a 512 KiB pass, from L2: that
// scatter took 0.8% of the xhc_flash bench's samples, the blocks 57% less
// (docs/design/skinny-gemm-and-isa-dispatch.md).
constexpr int kPackCols = 64;

template <class S>
void PackDotRowsBcast(int R, int D, const float* W, size_t ldw, PackedBuffer* packed) {
  constexpr int kW = DotPassRows<S>();
  const int passes = (R + kW - 1) / kW;
  packed->assign(static_cast<size_t>(passes) * D * kW, 0.0f);
  for (int p = 0; p < passes; ++p) {
    float* pass = packed->data() + static_cast<size_t>(p) * D * kW;
    const int r0 = p * kW, r1 = std::min(R, r0 + kW);
    for (int c0 = 0; c0 < D; c0 += kPackCols) {
      const int c1 = std::min(D, c0 + kPackCols);
      for (int r = r0; r < r1; ++r) {
        const float* src = W + r * ldw;
        float* dst = pass + (r - r0);
        for (int c = c0; c < c1; ++c) dst[static_cast<size_t>(c) * kW] = src[c];
      }
    }
  }
}

template <class S>
void DotRowsSimd(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
                 float* out, int ldo) {
  thread_local PackedBuffer packed;  // the packed call's sums: W packed here, per call
  PackDotRowsBcast<S>(R, D, W, ldw, &packed);
  DotRowsBcastPacked<S>(nt, R, D, X, ldx, packed.data(), out, ldo);
}

// TN tokens x (CW vectors of kL columns, the last masked when kMasked): out (+)= A . W over
// all R rows, W vectors in registers, one broadcast A element at a time.
template <class S, int TN, int CW, bool kMasked>
inline void AxpyTile(int R, const float* A, int lda, const float* W, size_t ldw, float* out,
                     size_t ldo, bool accumulate, typename S::Mask mask) {
  using V = typename S::V;
  // out is prefetched this many floats ahead (2 tiles; on AVX2 4 or 8 measured no better):
  // its rows are 64 KiB apart, no prefetcher follows them.
  constexpr int kOutAhead = 2 * 3 * S::kL;
  V a[TN][CW];
  XHC_UNROLL
  for (int i = 0; i < TN; ++i) {
    XHC_UNROLL
    for (int v = 0; v < CW; ++v) a[i][v] = S::Zero();
  }
  // Every line the tile-width run touches: one request per 16 floats, and its last float (an
  // unaligned run spans one line more). The first and last float alone would leave the
  // middle line of AVX-512's 3-vector run unrequested (skinny_gemm_bench AxpyRows stream
  // median +10-15% with it: docs/design/skinny-gemm-and-isa-dispatch.md).
  if (!kMasked) {
    XHC_UNROLL
    for (int i = 0; i < TN; ++i) {
      const float* p = out + i * ldo + kOutAhead;
      XHC_UNROLL
      for (int c = 0; c < CW * S::kL; c += 16) S::Prefetch(p + c);
      S::Prefetch(p + CW * S::kL - 1);
    }
  }
  for (int r = 0; r < R; ++r) {
    V w[CW];
    XHC_UNROLL
    for (int v = 0; v < CW; ++v) {
      const float* p = W + r * ldw + v * S::kL;
      w[v] = S::Pin(kMasked && v == CW - 1 ? S::LoadMasked(p, mask) : S::Load(p));
    }
    XHC_UNROLL
    for (int i = 0; i < TN; ++i) {
      const V s = S::Bcast(A + i * lda + r);
      XHC_UNROLL
      for (int v = 0; v < CW; ++v) a[i][v] = S::Fma(s, w[v], a[i][v]);
    }
  }
  XHC_UNROLL
  for (int i = 0; i < TN; ++i) {
    XHC_UNROLL
    for (int v = 0; v < CW; ++v) {
      float* o = out + i * ldo + v * S::kL;
      const bool masked = kMasked && v == CW - 1;
      if (accumulate) a[i][v] = S::Add(masked ? S::LoadMasked(o, mask) : S::Load(o), a[i][v]);
      if (masked) {
        S::StoreMasked(o, mask, a[i][v]);
      } else {
        S::Store(o, a[i][v]);
      }
    }
  }
}

// Columns [0, cl) of TN tokens: 3-vector tiles, then 1-vector ones, then a masked tail.
template <class S, int TN>
inline void AxpyTokens(int R, int cl, const float* A, int lda, const float* W, size_t ldw,
                       float* out, size_t ldo, bool accumulate) {
  constexpr int kL = S::kL;
  const typename S::Mask none{};
  int c = 0;
  for (; c + 3 * kL <= cl; c += 3 * kL) {
    AxpyTile<S, TN, 3, false>(R, A, lda, W + c, ldw, out + c, ldo, accumulate, none);
  }
  for (; c + kL <= cl; c += kL) {
    AxpyTile<S, TN, 1, false>(R, A, lda, W + c, ldw, out + c, ldo, accumulate, none);
  }
  if (c < cl) {
    AxpyTile<S, TN, 1, true>(R, A, lda, W + c, ldw, out + c, ldo, accumulate, S::TailMask(cl - c));
  }
}

// One column chunk [0, cl) of nt tokens against the chunk's R rows of W (row stride ld):
// groups of up to 4 tokens, each over the whole chunk.
template <class S>
inline void AxpyChunk(int nt, int R, int cl, const float* A, int lda, const float* wc, size_t ld,
                      float* out, size_t ldo, bool accumulate) {
  for (int t0 = 0; t0 < nt; t0 += 4) {
    const float* a = A + t0 * lda;
    float* o = out + t0 * ldo;
    switch (std::min(4, nt - t0)) {
      case 4: AxpyTokens<S, 4>(R, cl, a, lda, wc, ld, o, ldo, accumulate); break;
      case 3: AxpyTokens<S, 3>(R, cl, a, lda, wc, ld, o, ldo, accumulate); break;
      case 2: AxpyTokens<S, 2>(R, cl, a, lda, wc, ld, o, ldo, accumulate); break;
      default: AxpyTokens<S, 1>(R, cl, a, lda, wc, ld, o, ldo, accumulate); break;
    }
  }
}

// W packed here, chunk by chunk, into an L1 buffer (the unpacked call, for tests).
template <class S>
void AxpyRowsSimd(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw,
                  float* out, size_t ldo, bool accumulate) {
  alignas(64) float wp[kAxpyMaxR * kAxpyChunk];
  for (int c0 = 0; c0 < D; c0 += kAxpyChunk) {
    const int cl = std::min(kAxpyChunk, D - c0);
    const float* wc = W + c0;
    size_t ld = ldw;
    if (R <= kAxpyMaxR) {  // taller W (no call site has one): read in place, the same sums
      PackRows<S, kAxpyChunk>(R, R, true, W + c0, ldw, cl, wp);
      wc = wp, ld = kAxpyChunk;
    }
    AxpyChunk<S>(nt, R, cl, A, lda, wc, ld, out + c0, ldo, accumulate);
  }
}

// W packed once for every call against it (SkinnyWeights): chunk k's R rows of kAxpyChunk
// floats (zero past D) at k * R * kAxpyChunk, the layout the per-call pack writes into its
// L1 buffer; the same tiles read it, so the same sums. Packing per call re-read W's rows
// (64 KiB apart at N*C = 16384, so the same column of all rows shares one L1 and one L2 set)
// for every 16-token block: with it skipped (timing only), AxpyRows ran 55 -> 70 GFLOP/s
// streaming (docs/design/skinny-gemm-and-isa-dispatch.md).
template <class S>
void PackAxpyRowsChunks(int R, int D, const float* W, size_t ldw, PackedBuffer* packed) {
  const int chunks = (D + kAxpyChunk - 1) / kAxpyChunk;
  packed->assign(static_cast<size_t>(chunks) * R * kAxpyChunk, 0.0f);
  for (int k = 0; k < chunks; ++k) {
    const int c0 = k * kAxpyChunk;
    PackRows<S, kAxpyChunk>(R, R, true, W + c0, ldw, std::min(kAxpyChunk, D - c0),
                            packed->data() + static_cast<size_t>(k) * R * kAxpyChunk);
  }
}

template <class S>
void AxpyRowsPackedSimd(int nt, int R, int D, const float* A, int lda, const float* packed,
                        float* out, size_t ldo, bool accumulate) {
  for (int k = 0, c0 = 0; c0 < D; ++k, c0 += kAxpyChunk) {
    AxpyChunk<S>(nt, R, std::min(kAxpyChunk, D - c0), A, lda,
                 packed + static_cast<size_t>(k) * R * kAxpyChunk, kAxpyChunk, out + c0, ldo,
                 accumulate);
  }
}

// AtXRows (weight gradients, out (R, D) = A^T . X over n tokens). Columns in chunks of
// kAtXChunk: each chunk's R x kAtXChunk running sums live in a contiguous buffer (out's rows
// are D floats apart, the cache-set aliasing above), the tokens walk the chunks in blocks of
// kAtXTokens whose X rows are packed first, chunk by chunk. Register tile: 4 rows x 3 vectors
// (12 accumulators, 3 X vectors, 1 broadcast A element), over the block's tokens in order:
// per element one FMA per token, t increasing, whatever the chunking.
// RN rows x CW vectors of the chunk's sums (row stride kAtXChunk) += the kt tokens of xp.
template <class S, int RN, int CW>
inline void AtXTile(int kt, const float* A, int lda, const float* xp, float* acc) {
  using V = typename S::V;
  V a[RN][CW];
  XHC_UNROLL
  for (int j = 0; j < RN; ++j) {
    XHC_UNROLL
    for (int v = 0; v < CW; ++v) a[j][v] = S::LoadA(acc + j * kAtXChunk + v * S::kL);
  }
  for (int t = 0; t < kt; ++t) {
    V x[CW];
    XHC_UNROLL
    for (int v = 0; v < CW; ++v) x[v] = S::Pin(S::LoadA(xp + t * kAtXChunk + v * S::kL));
    XHC_UNROLL
    for (int j = 0; j < RN; ++j) {
      const V s = S::Bcast(A + t * lda + j);
      XHC_UNROLL
      for (int v = 0; v < CW; ++v) a[j][v] = S::Fma(s, x[v], a[j][v]);
    }
  }
  XHC_UNROLL
  for (int j = 0; j < RN; ++j) {
    XHC_UNROLL
    for (int v = 0; v < CW; ++v) S::StoreA(acc + j * kAtXChunk + v * S::kL, a[j][v]);
  }
}

template <class S, int RN>
inline void AtXRowGroup(int kt, int padded, const float* A, int lda, const float* xp, float* acc) {
  constexpr int kL = S::kL;
  int c = 0;
  for (; c + 3 * kL <= padded; c += 3 * kL) AtXTile<S, RN, 3>(kt, A, lda, xp + c, acc + c);
  for (; c < padded; c += kL) AtXTile<S, RN, 1>(kt, A, lda, xp + c, acc + c);
}

// AtXRows' sparse rows (sparse_rows): per row, its nonzero coefficients of a token block in
// token order, each with its token's offset in the packed block (xp). Built once per token
// block (without branches), read by every column chunk.
struct SparseTerm {
  float a;
  int x_off;
};
struct SparseRowTerms {
  std::vector<SparseTerm> terms;  // row r's at r * kAtXTokens
  std::vector<int> count;         // per row

  void Build(int kt, int sparse, const float* A, int lda) {
    terms.resize(static_cast<size_t>(sparse) * kAtXTokens);
    count.assign(sparse, 0);
    for (int r = 0; r < sparse; ++r) {
      SparseTerm* row = terms.data() + static_cast<size_t>(r) * kAtXTokens;
      int m = 0;
      for (int t = 0; t < kt; ++t) {
        row[m] = {A[t * lda + r], t * kAtXChunk};
        m += row[m].a != 0.0f;
      }
      count[r] = m;
    }
  }
};

// Rows [0, sparse) of the chunk's sums (row stride kAtXChunk) += their nonzero terms: register
// tiles of 3 vectors over each row's terms, in token order, so each element is the same
// running sum as in the dense tiles.
template <class S>
inline void AtXSparseRows(const SparseRowTerms& st, int padded, const float* xp, float* acc) {
  using V = typename S::V;
  constexpr int kL = S::kL;
  for (int r = 0; r < static_cast<int>(st.count.size()); ++r) {
    const int m = st.count[r];
    const SparseTerm* terms = st.terms.data() + static_cast<size_t>(r) * kAtXTokens;
    float* o = acc + r * kAtXChunk;
    int c = 0;
    for (; m > 0 && c + 3 * kL <= padded; c += 3 * kL) {
      V a0 = S::LoadA(o + c), a1 = S::LoadA(o + c + kL), a2 = S::LoadA(o + c + 2 * kL);
      for (int i = 0; i < m; ++i) {
        const V s = S::Bcast(&terms[i].a);
        const float* x = xp + terms[i].x_off + c;
        a0 = S::Fma(s, S::LoadA(x), a0);
        a1 = S::Fma(s, S::LoadA(x + kL), a1);
        a2 = S::Fma(s, S::LoadA(x + 2 * kL), a2);
      }
      S::StoreA(o + c, a0), S::StoreA(o + c + kL, a1), S::StoreA(o + c + 2 * kL, a2);
    }
    for (; m > 0 && c < padded; c += kL) {
      V a0 = S::LoadA(o + c);
      for (int i = 0; i < m; ++i) {
        a0 = S::Fma(S::Bcast(&terms[i].a), S::LoadA(xp + terms[i].x_off + c), a0);
      }
      S::StoreA(o + c, a0);
    }
  }
}

template <class S>
void AtXRowsSimd(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx,
                 float* out, size_t ldo, int sparse) {
  // Token blocks outer, the call's column chunks inner: a block's rows are read as runs of D
  // columns (the caller's whole column range, e.g. 4 KiB), which the hardware prefetcher
  // follows, instead of 768-byte runs one chunk at a time across all n tokens. The running
  // sums of every chunk (R x D, padded per chunk) stay in L2 between the blocks.
  const int chunks = (D + kAtXChunk - 1) / kAtXChunk;
  const size_t chunk_stride = static_cast<size_t>(R) * kAtXChunk;
  thread_local std::vector<float, CacheLineAllocator<float>> acc_s;
  acc_s.assign(static_cast<size_t>(chunks) * chunk_stride, 0.0f);
  alignas(64) float xp[kAtXTokens * kAtXChunk];
  thread_local SparseRowTerms sparse_terms;
  // The next chunk's X rows requested into L2, not L1, where a chunk has few dense rows to
  // compute (up to 32: xhc's 16 read-map rows, the maps' 32): 32 rows of the same columns
  // share one L1 set, and requested that early they evicted each other (-5 to -8% of the
  // weight products' time with L2); with more (xhc_flash's entry, 64) L1 was 5% faster.
  const bool to_l2 = R - sparse <= 32;  // docs/design/skinny-gemm-and-isa-dispatch.md
  for (int t0 = 0; t0 < n; t0 += kAtXTokens) {
    const int kt = std::min(kAtXTokens, n - t0);
    const float* a = A + static_cast<size_t>(t0) * lda;
    sparse_terms.Build(kt, sparse, a, lda);
    for (int k = 0, c0 = 0; k < chunks; ++k, c0 += kAtXChunk) {
      const int cl = std::min(kAtXChunk, D - c0);
      const int padded = PadToLanes<S>(cl);  // zero columns: sums of +0, never stored
      float* acc = acc_s.data() + k * chunk_stride;
      PackRows<S, kAtXChunk>(kt, kt, false, X + t0 * ldx + c0, ldx, cl, xp);
      // The next chunk's columns of this block (or the next block's first chunk) are
      // requested while this one computes, a share per row group (into L2 or L1: to_l2, above).
      const bool last = k + 1 == chunks;
      const float* next = !last         ? X + t0 * ldx + c0 + kAtXChunk
                          : t0 + kt < n ? X + (t0 + kt) * ldx
                                        : nullptr;
      const int next_rows = !last ? kt : std::min(kAtXTokens, n - t0 - kt);
      const int next_cl = !last ? std::min(kAtXChunk, D - c0 - kAtXChunk) : std::min(kAtXChunk, D);
      AtXSparseRows<S>(sparse_terms, padded, xp, acc);
      const int groups = std::max(1, (R - sparse + 3) / 4);
      const int per_group = (next_rows + groups - 1) / groups;
      int r0 = sparse;
      for (int g = 0; r0 + 4 <= R; r0 += 4, ++g) {
        if (next) {
          PrefetchRows<S>(next, ldx, next_cl, g * per_group,
                          std::min(next_rows, (g + 1) * per_group), to_l2);
        }
        AtXRowGroup<S, 4>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk);
      }
      if (next && (r0 < R || r0 == sparse)) {  // the last, partial group's share (or all)
        PrefetchRows<S>(next, ldx, next_cl, (groups - 1) * per_group, next_rows, to_l2);
      }
      switch (R - r0) {
        case 3: AtXRowGroup<S, 3>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk); break;
        case 2: AtXRowGroup<S, 2>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk); break;
        case 1: AtXRowGroup<S, 1>(kt, padded, a + r0, lda, xp, acc + r0 * kAtXChunk); break;
        default: break;
      }
    }
  }
  for (int k = 0, c0 = 0; k < chunks; ++k, c0 += kAtXChunk) {
    const int cl = std::min(kAtXChunk, D - c0);
    for (int r = 0; r < R; ++r) {
      std::memcpy(out + r * ldo + c0, acc_s.data() + k * chunk_stride + r * kAtXChunk,
                  sizeof(float) * cl);
    }
  }
}

}  // namespace
}  // namespace xhc::kernels::cpu::internal

// Defines the path's entry points of skinny_gemm_kernels.h (DotRowsAvx2, ... for S = Avx2)
// over the kernels above; used once by each path's TU, after its traits struct S.
#define XHC_SKINNY_ENTRY_POINTS(S)                                                               \
  namespace xhc::kernels::cpu::internal {                                                        \
  void DotRows##S(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,  \
                  float* out, int ldo) {                                                         \
    DotRowsSimd<S>(nt, R, D, X, ldx, W, ldw, out, ldo);                                          \
  }                                                                                              \
  void PackDotRows##S(int R, int D, const float* W, size_t ldw, PackedBuffer* packed) {          \
    PackDotRowsBcast<S>(R, D, W, ldw, packed);                                                   \
  }                                                                                              \
  void DotRows##S##Packed(int nt, int R, int D, const float* X, size_t ldx, const float* packed, \
                          float* out, int ldo) {                                                 \
    DotRowsBcastPacked<S>(nt, R, D, X, ldx, packed, out, ldo);                                   \
  }                                                                                              \
  void AxpyRows##S(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw,    \
                   float* out, size_t ldo, bool accumulate) {                                    \
    AxpyRowsSimd<S>(nt, R, D, A, lda, W, ldw, out, ldo, accumulate);                             \
  }                                                                                              \
  void PackAxpyRows##S(int R, int D, const float* W, size_t ldw, PackedBuffer* packed) {         \
    PackAxpyRowsChunks<S>(R, D, W, ldw, packed);                                                 \
  }                                                                                              \
  void AxpyRows##S##Packed(int nt, int R, int D, const float* A, int lda, const float* packed,   \
                           float* out, size_t ldo, bool accumulate) {                            \
    AxpyRowsPackedSimd<S>(nt, R, D, A, lda, packed, out, ldo, accumulate);                       \
  }                                                                                              \
  void AtXRows##S(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx,      \
                  float* out, size_t ldo, int sparse_rows) {                                     \
    AtXRowsSimd<S>(n, R, D, A, lda, X, ldx, out, ldo, sparse_rows);                              \
  }                                                                                              \
  }  // namespace xhc::kernels::cpu::internal

#undef XHC_UNROLL
#undef XHC_ALWAYS_INLINE

#endif  // XHC_KERNELS_CPU_XHC_SKINNY_GEMM_SIMD_H_
