// Optimized weight-gradient backward (W) of the xHC sublayer. Reductions over tokens run
// through AtXColumns (the products tmp = A^T . X: own kernel, one running sum per element over
// the tokens in order; OpenBLAS re-packed A for every column block:
// docs/design/skinny-gemm-and-isa-dispatch.md) or sequential loops; the conv reduction is
// split over channels. The result is bit-identical for any thread count.

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/flash_window.h"
#include "kernels/cpu/xhc/gemm_util.h"
#include "kernels/cpu/xhc/hc_ops.h"
#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/xhc_check.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_stack.h"

namespace xhc::kernels {
namespace {

// xhc_flash: the router and the w read maps of a window all project the entry state X0, so
// the window's first weight pass forms the products of all of them, win.wgrad (N + w*N, D) =
// A^T . X0 with A's rows stacked [router; pre_0; ..; pre_w-1] like win.proj, in ONE pass over
// X0 instead of one per sublayer; each sublayer's pass takes its rows, the last frees them.
// Each element is the same running sum over the tokens (AtXColumns) as its own sublayer's
// product alone, and A's elements the same products of the same floats: the bits are unchanged.
const float* WindowProjectionProducts(const XhcDims& d, const XhcCache& cache, const float* X0) {
  FlashWindowT<float>& win = *cache.window;
  const int n = cache.B * cache.T_len, N = d.N, D = d.D(), w = d.window, R = N + w * N;
  if (win.wgrad.empty()) {
    thread_local std::vector<float> A_s;
    std::vector<float>& A = A_s;
    A.resize(static_cast<size_t>(n) * R);
    for (int tok = 0; tok < n; ++tok) {
      float* a = A.data() + static_cast<size_t>(tok) * R;
      const float* dzr = win.dz_router.data() + static_cast<size_t>(tok) * N;
      for (int i = 0; i < N; ++i) a[i] = dzr[i] * win.rstd_ln[tok];
      for (int q = 0; q < w; ++q) {
        const float* dzp = win.dz_pre.data() + (static_cast<size_t>(tok) * w + q) * N;
        for (int i = 0; i < N; ++i) a[N + q * N + i] = dzp[i] * win.pre_alpha[q] * win.rstd[tok];
      }
    }
    win.wgrad.resize(static_cast<size_t>(R) * D);
    // The router's rows: per token only the routed streams' dz are nonzero (skipped zeros).
    cpu::AtXColumns(n, R, D, A.data(), X0, D, win.wgrad.data(), /*sparse_rows=*/N);
  }
  return win.wgrad.data();
}

// router.weight / pre.weight (+ biases, pre.alpha) from the stashed dz of the projections.
void ProjectionWeightGrads(const XhcDims& d, const XhcParams& P, const float* X_in,
                           const XhcCache& cache, const XhcGrads& G) {
  const int n = cache.B * cache.T_len, N = d.N, D = d.D();
  const int R = d.has_router ? 2 * N : N, off = d.has_router ? N : 0;
  const float alpha = P.pre_alpha[0];
  float pre_alpha = 0;
  // dz of the read map: the cache's (xhc, mhc), or the window's (xhc_flash: complete only once
  // the window entry's input backward ran; X_in is then the entry state X0).
  FlashWindowT<float>* win = cache.window.get();  // the window's products are freed here
  auto dz_pre = [&](int tok) {
    return d.flash ? win->dz_pre.data() + (static_cast<size_t>(tok) * d.window + d.pos) * N
                   : cache.dz_proj.data() + static_cast<size_t>(tok) * 2 * N + N;
  };
  // The products A^T . X_in of the router rows (t_router) and the read-map rows (t_pre).
  const float *t_router, *t_pre;
  if (d.flash) {
    const float* all = WindowProjectionProducts(d, cache, X_in);
    t_router = all;
    t_pre = all + static_cast<size_t>(N + d.pos * N) * D;
  } else {
    // Reused across calls (no page faults); references so OpenMP threads share them.
    thread_local std::vector<float> A_s, tmp_s;
    std::vector<float>& A = A_s;
    std::vector<float>& tmp = tmp_s;
    A.resize(static_cast<size_t>(n) * R), tmp.resize(static_cast<size_t>(R) * D);
    for (int tok = 0; tok < n; ++tok) {
      const float* dz = cache.dz_proj.data() + static_cast<size_t>(tok) * 2 * N;
      const float* dzp = dz_pre(tok);
      float* a = A.data() + static_cast<size_t>(tok) * R;
      for (int i = 0; i < N; ++i) {
        if (d.has_router) a[i] = dz[i] * cache.rstd_ln[tok];  // d / d W of ln(x).W
        a[off + i] = dzp[i] * alpha * cache.rstd[tok];        // d / d W of alpha rms(x).W
      }
    }
    // tmp (R, D) = A^T (R, n) . X_in (n, D); of the router's rows (first) only the routed
    // streams' are nonzero per token (k - m of N: TokenMapGrads), so their zeros are skipped.
    cpu::AtXColumns(n, R, D, A.data(), X_in, D, tmp.data(), off);
    t_router = tmp.data();
    t_pre = tmp.data() + static_cast<size_t>(off) * D;
  }
  for (int i = 0; i < N; ++i) {
    float bias = 0, corr = 0, galpha = 0;
    for (int tok = 0; tok < n; ++tok) {
      const float* dz = cache.dz_proj.data() + static_cast<size_t>(tok) * 2 * N;
      const float* proj = cache.proj.data() + static_cast<size_t>(tok) * 2 * N;
      if (d.has_router) {
        bias += dz[i];
        corr += dz[i] * cache.rstd_ln[tok] * cache.mean[tok];  // ln subtracts mean
      }
      galpha += dz_pre(tok)[i] * cache.rstd[tok] * proj[N + i];
    }
    if (d.has_router) {
      float* gw = G.router_weight + static_cast<size_t>(i) * D;
      const float* t = t_router + static_cast<size_t>(i) * D;
      for (int c = 0; c < D; ++c) gw[c] += t[c] - corr;
      G.router_bias[i] += bias;
    }
    float* gw = G.pre_weight + static_cast<size_t>(i) * D;
    const float* t = t_pre + static_cast<size_t>(i) * D;
    for (int c = 0; c < D; ++c) gw[c] += t[c];
    float pbias = 0;
    for (int tok = 0; tok < n; ++tok) pbias += dz_pre(tok)[i];
    G.pre_bias[i] += pbias;
    pre_alpha += galpha;
  }
  G.pre_alpha[0] += pre_alpha;                      // once per call, like every other element
  if (d.flash && ++win->wgrad_taken == d.window) {  // the window's last weight pass
    std::vector<float>().swap(win->wgrad);
    win->wgrad_taken = 0;
  }
}

// res.* and post.* from the stashed dz of the map pre-activations.
void MapWeightGrads(const XhcDims& d, const XhcParams& P, const XhcCache& cache,
                    const XhcGrads& G) {
  const int n = cache.B * cache.T_len, kk = d.Rres(), Q = d.Q(), Da = d.Da();
  thread_local std::vector<float> A_s, tmp_s;
  std::vector<float>& A = A_s;
  std::vector<float>& tmp = tmp_s;
  A.resize(static_cast<size_t>(n) * Q), tmp.resize(static_cast<size_t>(Q) * Da);
  for (int tok = 0; tok < n; ++tok) {
    for (int q = 0; q < Q; ++q) {
      const float alpha = q < kk ? P.res_alpha[0] : P.post_alpha[0];
      A[static_cast<size_t>(tok) * Q + q] =
          cache.dz_map[static_cast<size_t>(tok) * Q + q] * alpha * cache.rstd_a[tok];
    }
  }
  cpu::AtXColumns(n, Q, Da, A.data(), cache.xa.data(), Da, tmp.data());
  float res_alpha = 0, post_alpha = 0;
  for (int q = 0; q < Q; ++q) {
    const bool res = q < kk;
    const int row = res ? q : q - kk;
    float* gw = (res ? G.res_weight : G.post_weight) + static_cast<size_t>(row) * Da;
    const float* t = tmp.data() + static_cast<size_t>(q) * Da;
    for (int c = 0; c < Da; ++c) gw[c] += t[c];
    float bias = 0, galpha = 0;
    for (int tok = 0; tok < n; ++tok) {
      const float dz = cache.dz_map[static_cast<size_t>(tok) * Q + q];
      bias += dz;
      galpha += dz * cache.rstd_a[tok] * cache.map_raw[static_cast<size_t>(tok) * Q + q];
    }
    (res ? G.res_bias : G.post_bias)[row] += bias;
    (res ? res_alpha : post_alpha) += galpha;
  }
  if (d.has_mix) G.res_alpha[0] += res_alpha;  // once per call, like every other element
  G.post_alpha[0] += post_alpha;
}

// Tokens per chunk of the conv weight sums (ConvWeightBlock).
constexpr int kConvChunk = 16;

// G taps tau0 .. tau0 + G - 1 of one convolution over a chunk of nt tokens, for the 16-channel
// vectors of [0, w) (then a scalar tail): each vector's G sums are held in registers across the
// chunk (loaded from and stored to gw once), where a pass per token loads and stores every
// tap's sums of the block (24 at kernels 4, 8, 12) for every token
// (docs/design/fused-xhc-sublayer.md). Per element the same additions in the same token order
// as `gw[tau][c] += dg[t][c] * out[t - tau][c]` token by token, so the same bits. dg: the
// chunk's first token's row (rows w apart); out: the out row of that token (rows w apart, the
// earlier tokens' before it); t0: the first token's position in its sequence; T: sequence
// length.
template <int G>
XHC_INLINE void ConvWeightTaps(int nt, int t0, int T, int tau0, int w, const float* dg,
                               const float* out, float* gw) {
  const float* o_base = out - tau0 * w;  // token tok0 - tau0
  int c = 0;
  for (; c + cpu::kLanes <= w; c += cpu::kLanes) {
    // Four named sums, not an array (cpu_util.h AddScaledRows): kept in registers.
    cpu::V16 s0 = cpu::LoadV(gw + c), s1 = {}, s2 = {}, s3 = {};
    if (G > 1) s1 = cpu::LoadV(gw + w + c);
    if (G > 2) s2 = cpu::LoadV(gw + 2 * w + c);
    if (G > 3) s3 = cpu::LoadV(gw + 3 * w + c);
    int t = t0;
    for (int i = 0; i < nt; ++i, t = t + 1 == T ? 0 : t + 1) {
      const cpu::V16 g = cpu::LoadV(dg + i * w + c);
      const float* o = o_base + i * w + c;  // out[tok - tau0]
      if (t >= tau0 + G - 1) {  // every tap inside the sequence (all but its first tokens)
        s0 += g * cpu::LoadV(o);
        if (G > 1) s1 += g * cpu::LoadV(o - w);
        if (G > 2) s2 += g * cpu::LoadV(o - 2 * w);
        if (G > 3) s3 += g * cpu::LoadV(o - 3 * w);
      } else {  // taps reaching before the sequence's start add nothing
        if (t >= tau0) s0 += g * cpu::LoadV(o);
        if (G > 1 && t >= tau0 + 1) s1 += g * cpu::LoadV(o - w);
        if (G > 2 && t >= tau0 + 2) s2 += g * cpu::LoadV(o - 2 * w);
      }
    }
    cpu::StoreV(gw + c, s0);
    if (G > 1) cpu::StoreV(gw + w + c, s1);
    if (G > 2) cpu::StoreV(gw + 2 * w + c, s2);
    if (G > 3) cpu::StoreV(gw + 3 * w + c, s3);
  }
  for (; c < w; ++c) {
    for (int a = 0; a < G; ++a) {
      float s = gw[a * w + c];
      int t = t0;
      for (int i = 0; i < nt; ++i, t = t + 1 == T ? 0 : t + 1) {
        if (t >= tau0 + a) s += dg[i * w + c] * o_base[(i - a) * w + c];
      }
      gw[a * w + c] = s;
    }
  }
}

// One channel block [c0, c1) of the conv weight sums, tokens in order per element, in chunks
// of kConvChunk tokens. Each chunk's pieces of the block (its dg rows, and the out rows from
// widest - 1 tokens before it) are first copied together: read in place, every token's rows of
// a column lie 12 or 16 KiB apart, i.e. in one L1 set and few L2 sets, and a vector's walk
// over the chunk evicted its own lines (docs/design/fused-xhc-sublayer.md). sums: the block's
// own, [tap of all j in order][c1 - c0].
XHC_CLONES void ConvWeightBlock(const XhcDims& d, const XhcCache& cache, int c0, int c1,
                                float* sums) {
  const int T = cache.T_len, n = cache.B * T, C = d.C, K = d.K, w = c1 - c0;
  const int back = std::max(0, d.Widest() - 1);  // out rows of earlier tokens a chunk reads
  thread_local std::vector<float> dg_s, out_s;
  dg_s.resize(static_cast<size_t>(d.r) * kConvChunk * w);
  out_s.resize(static_cast<size_t>(back + kConvChunk) * w);
  for (int tok0 = 0; tok0 < n; tok0 += kConvChunk) {
    const int nt = std::min(kConvChunk, n - tok0);
    for (int j = 0; j < d.r; ++j) {
      for (int i = 0; i < nt; ++i) {
        std::memcpy(dg_s.data() + (static_cast<size_t>(j) * kConvChunk + i) * w,
                    cache.dg.data() + ((static_cast<size_t>(tok0) + i) * d.r + j) * C + c0,
                    sizeof(float) * w);
      }
    }
    for (int i = std::max(-back, -tok0); i < nt; ++i) {  // tokens before 0 are never read
      std::memcpy(out_s.data() + static_cast<size_t>(back + i) * w,
                  cache.aug.data() + (static_cast<size_t>(tok0) + i) * K * C + c0,
                  sizeof(float) * w);
    }
    const float* out = out_s.data() + static_cast<size_t>(back) * w;
    // The next chunk's pieces (its dg rows, then its out rows), requested a share before each
    // tap group, while this chunk computes.
    const int next_nt = std::min(kConvChunk, n - tok0 - nt), pieces = (d.r + 1) * next_nt;
    int groups = 0, piece = 0, group = 0;
    for (int j = 0; j < d.r; ++j) groups += (d.kernels[j] + 3) / 4;
    auto request = [&](int upto) {
      for (; piece < upto; ++piece) {
        const int row = piece / next_nt, i = piece % next_nt;
        const size_t tok = static_cast<size_t>(tok0) + nt + i;
        const float* p = row < d.r ? cache.dg.data() + (tok * d.r + row) * C + c0
                                   : cache.aug.data() + tok * K * C + c0;
        cpu::PrefetchL2(w, p);
      }
    };
    float* __restrict gj = sums;
    for (int j = 0; j < d.r; ++j) {
      const float* dg = dg_s.data() + static_cast<size_t>(j) * kConvChunk * w;
      for (int tau0 = 0; tau0 < d.kernels[j]; tau0 += 4) {
        if (next_nt > 0) request(static_cast<int>(static_cast<int64_t>(pieces) * ++group / groups));
        float* gw = gj + static_cast<size_t>(tau0) * w;
        const int t0 = tok0 % T;
        switch (std::min(4, d.kernels[j] - tau0)) {
          case 4: ConvWeightTaps<4>(nt, t0, T, tau0, w, dg, out, gw); break;
          case 3: ConvWeightTaps<3>(nt, t0, T, tau0, w, dg, out, gw); break;
          case 2: ConvWeightTaps<2>(nt, t0, T, tau0, w, dg, out, gw); break;
          default: ConvWeightTaps<1>(nt, t0, T, tau0, w, dg, out, gw); break;
        }
      }
      gj += static_cast<size_t>(d.kernels[j]) * w;
    }
  }
}

// conv.j.weight[tau][c] += sum_t dg_j[t][c] * out[t - tau][c]; parallel over channel blocks,
// sequential over tokens inside a block.
void ConvWeightGrads(const XhcDims& d, const XhcCache& cache, const XhcGrads& G) {
  const int C = d.C;
  // 256 channels (1 KiB runs of each token's rows, which the hardware prefetcher follows; at
  // 64 every block walked all tokens in 256-byte pieces, a cache miss each:
  // docs/design/fused-xhc-sublayer.md).
  constexpr int kBlock = 256;
  const int num_blocks = (C + kBlock - 1) / kBlock;
  int taps = 0;
  for (int j = 0; j < d.r; ++j) taps += d.kernels[j];
  // This micro-batch's sum is formed apart, then added: accumulation across calls is then
  // one rounding per call, as for the other parameters. Each block sums into its own
  // cache-line-aligned part: in one shared [tap][C] array two blocks met inside a cache line
  // on every tap row, which the threads then passed back and forth per token
  // (docs/design/fused-xhc-sublayer.md).
  const size_t part = (static_cast<size_t>(taps) * kBlock + 15) / 16 * 16;
  std::vector<float, cpu::CacheLineAllocator<float>> sums(part * num_blocks, 0.0f);
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int c0 = blk * kBlock, c1 = std::min(C, c0 + kBlock);
    ConvWeightBlock(d, cache, c0, c1, sums.data() + part * blk);
  }
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int c0 = blk * kBlock, w = std::min(C, c0 + kBlock) - c0;
    const float* gj = sums.data() + part * blk;
    for (int j = 0; j < d.r; ++j) {
      for (int tau = 0; tau < d.kernels[j]; ++tau, gj += w) {
        float* dst = G.conv_weight[j] + static_cast<size_t>(tau) * C + c0;
        for (int c = 0; c < w; ++c) dst[c] += gj[c];
      }
    }
  }
}

}  // namespace

absl::Status XhcBackwardWeights(const XhcConfig& cfg, const XhcParams& P, const float* X_in,
                                const XhcCache& cache, const XhcGrads& grads) {
  if (!X_in) return absl::InvalidArgumentError("null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache.dims.C));
  RETURN_IF_ERROR(CheckCache(d, cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  RETURN_IF_ERROR(CheckGrads(d, grads));
  if (cfg.type == ResidualType::kHc) return hc::BackwardWeights(d, P, X_in, cache, grads);
  RETURN_IF_ERROR(CheckWindowBackwardDone(d, cache));
  ProjectionWeightGrads(d, P, X_in, cache, grads);
  MapWeightGrads(d, P, cache, grads);
  if (d.r > 0) ConvWeightGrads(d, cache, grads);
  return absl::OkStatus();
}

}  // namespace xhc::kernels
