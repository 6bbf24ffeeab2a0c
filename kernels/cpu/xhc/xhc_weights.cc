// Optimized weight-gradient backward (W) of the xHC sublayer. Reductions over tokens are
// sgemms with the token axis as the inner dimension (OpenBLAS threads split only the output,
// so each element's token order is fixed) or sequential loops; the conv reduction is split
// over channels. The result is bit-identical for any thread count. The two projection
// products tmp = A^T . X run through AtXColumns (own kernel, tokens in order per element; it
// replaced OpenBLAS, which re-packed A for every column block: PERF.md, 14).

#include <algorithm>
#include <vector>

#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/flash_window.h"
#include "kernels/cpu/xhc/gemm_util.h"
#include "kernels/cpu/xhc/hc_ops.h"
#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/xhc_check.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_stack.h"
#include "base/status_macros.h"

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
        a[off + i] = dzp[i] * alpha * cache.rstd[tok];         // d / d W of alpha rms(x).W
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
  G.pre_alpha[0] += pre_alpha;  // once per call, like every other element
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

// One channel block [c0, c1) of the conv weight sums, tokens in order (per element; the
// convolutions j share the token walk, so each token's dg rows and the out rows it reads are
// fetched once for all j). sums: the block's own, [tap of all j in order][c1 - c0].
XHC_CLONES void ConvWeightBlock(const XhcDims& d, const XhcCache& cache, int c0, int c1,
                                float* sums) {
  const int T = cache.T_len, n = cache.B * T, C = d.C, K = d.K, w = c1 - c0;
  for (int tok = 0; tok < n; ++tok) {
    const int t = tok % T;
    if (tok + 2 < n) {  // the rows two tokens on: each token's dg rows and out row are new
      for (int j = 0; j < d.r; ++j) {
        cpu::PrefetchSpan(w, cache.dg.data() + (static_cast<size_t>(tok + 2) * d.r + j) * C + c0);
      }
      cpu::PrefetchSpan(w, cache.aug.data() + static_cast<size_t>(tok + 2) * K * C + c0);
    }
    float* __restrict gj = sums;
    for (int j = 0; j < d.r; ++j) {
      const float* __restrict dg =
          cache.dg.data() + (static_cast<size_t>(tok) * d.r + j) * C + c0;
      for (int tau = 0; tau < d.kernels[j] && tau <= t; ++tau) {
        const float* __restrict out =
            cache.aug.data() + static_cast<size_t>(tok - tau) * K * C + c0;
        float* __restrict gw = gj + static_cast<size_t>(tau) * w;
        for (int c = 0; c < w; ++c) gw[c] += dg[c] * out[c];
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
  // 64 every block walked all tokens in 256-byte pieces, a cache miss each: PERF.md, 14).
  constexpr int kBlock = 256;
  const int num_blocks = (C + kBlock - 1) / kBlock;
  int taps = 0;
  for (int j = 0; j < d.r; ++j) taps += d.kernels[j];
  // This micro-batch's sum is formed apart, then added: accumulation across calls is then
  // one rounding per call, as for the other parameters. Each block sums into its own
  // cache-line-aligned part: in one shared [tap][C] array two blocks met inside a cache line
  // on every tap row, which the threads then passed back and forth per token (PERF.md, 56).
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
