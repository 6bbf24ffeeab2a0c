// Optimized forward of the xHC sublayer: XhcPre (maps, selection, dense read, gather) and
// XhcPost (temporal augmentation + mix + write + scatter in one pass, in place).
//
// The router / read-map projections are one sgemm on the RAW state, [n, N*C] x [N*C, 2N];
// the LayerNorm / RMS corrections are applied to the 2N outputs afterwards
// (ln(x).w = rstd_ln * (x.w - mean * sum(w)), rms(x).w = rstd * x.w), so the normalised
// state is never materialised.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/flash_window.h"
#include "kernels/cpu/xhc/hc_ops.h"
#include "kernels/cpu/xhc/sinkhorn.h"
#include "kernels/cpu/xhc/sinkhorn_batch.h"
#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/temporal_aug.h"
#include "kernels/cpu/xhc/xhc_check.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_stack.h"

namespace xhc::kernels {
namespace {

struct Stats {
  float mean, rstd_ln, rstd;  // of the flattened state: LayerNorm and RMS factors
};

// One pass over the token's D = N*C values (double combine keeps E[x^2] - mean^2 accurate).
XHC_INLINE Stats TokenStats(int D, const float* x) {
  double sum, sumsq;
  cpu::SumSq(D, x, &sum, &sumsq);
  const double mean = sum / D;
  const double var = std::max(0.0, sumsq / D - mean * mean);
  return {static_cast<float>(mean), static_cast<float>(1.0 / std::sqrt(var + kNormEps)),
          static_cast<float>(1.0 / std::sqrt(sumsq / D + kNormEps))};
}

// Per token: statistics, router and read map from the raw projections, selection, dense
// read, gather of the active streams and their rms factor. One pass over the token's N*C.
XHC_CLONES void TokenPre(const XhcDims& d, const XhcParams& P, const float* rowsum, const float* x,
                         size_t tok, float* u, XhcCache* cache) {
  const int N = d.N, k = d.k, C = d.C;
  const auto [mean, rstd_ln, rstd] = TokenStats(d.D(), x);
  cache->mean[tok] = mean;
  cache->rstd_ln[tok] = rstd_ln;
  cache->rstd[tok] = rstd;
  const float* proj = cache->proj.data() + tok * 2 * N;
  float* s = cache->s.data() + tok * N;
  float* hpre = cache->hpre.data() + tok * N;
  for (int i = 0; i < N; ++i) {
    s[i] = d.has_router ? Sigmoid(rstd_ln * (proj[i] - mean * rowsum[i]) + P.router_bias[i]) : 0.0f;
    hpre[i] = Sigmoid(P.pre_alpha[0] * rstd * proj[N + i] + P.pre_bias[i]);
  }
  int* idx = cache->idx.data() + tok * k;
  float* p = cache->p.data() + tok * k;
  if (d.has_router) {
    SelectActive(N, k, d.m, s, idx, p);
  } else {
    for (int j = 0; j < k; ++j) idx[j] = j, p[j] = 1.0f;
  }
  float* __restrict ut = u + tok * C;
  cpu::WeightedSum(C, N, hpre, x, C, ut);  // dense read, all N streams in one sweep
  float* xa = cache->xa.data() + tok * k * C;
  for (int j = 0; j < k; ++j) std::memcpy(xa + j * C, x + idx[j] * C, sizeof(float) * C);
  double ssa, sqa;
  cpu::SumSq(k * C, xa, &ssa, &sqa);
  cache->rstd_a[tok] = static_cast<float>(1.0 / std::sqrt(sqa / (k * C) + kNormEps));
}

// xhc_flash window entry, per token (spec 4.5 steps 1-2 and the dense-read reuse of the
// seeds' Eq. 19 / 37): statistics of X0, the router and all w read maps from the raw
// projections in win->proj, the selection, the entry sublayer's full dense read, and for every
// later sublayer q its base readout sum_{i not active} hpre_q,i X0_i, which stays exact for the
// whole window because only the active streams change inside it.
XHC_CLONES void TokenFlashEntry(const XhcDims& d, const XhcParams& P, const float* rowsum,
                                const float* x, size_t tok, float* u, XhcCache* cache) {
  const int N = d.N, k = d.k, C = d.C, w = d.window, PW = N + w * N;
  FlashWindowT<float>& win = *cache->window;
  const auto [mean, rstd_ln, rstd] = TokenStats(d.D(), x);
  win.mean[tok] = mean;
  win.rstd_ln[tok] = rstd_ln;
  win.rstd[tok] = rstd;
  const float* proj = win.proj.data() + tok * PW;
  float* s = win.s.data() + tok * N;
  for (int i = 0; i < N; ++i) {
    s[i] = Sigmoid(rstd_ln * (proj[i] - mean * rowsum[i]) + P.router_bias[i]);
  }
  float* hpre = win.hpre.data() + tok * w * N;
  for (int q = 0; q < w; ++q) {
    for (int i = 0; i < N; ++i) {
      hpre[q * N + i] =
          Sigmoid(P.window_pre_alpha[q][0] * rstd * proj[N + q * N + i] + P.window_pre_bias[q][i]);
    }
  }
  int* idx = win.idx.data() + tok * k;
  SelectActive(N, k, d.m, s, idx, win.p.data() + tok * k);
  cpu::WeightedSum(C, N, hpre, x, C, u + tok * C);  // the entry reads all N streams once
  float hb[3 * 256];  // later sublayers' maps with the active streams masked out
  for (int q = 1; q < w; ++q) {
    std::memcpy(hb + (q - 1) * N, hpre + q * N, sizeof(float) * N);
    for (int j = 0; j < k; ++j) hb[(q - 1) * N + idx[j]] = 0.0f;
  }
  if (w > 1) cpu::WeightedSums(C, N, w - 1, hb, x, C, win.base.data() + (tok * w + 1) * C, C);
}

// xhc_flash sublayer q > 0 of a window, per token: u = base_q + sum_j hpre_q,idx_j Xa[j] with
// the current active streams (gathered into xa): k + 1 rows of C instead of N.
XHC_CLONES void TokenFlashRead(const XhcDims& d, size_t tok, float* u, XhcCache* cache) {
  const int k = d.k, C = d.C, N = d.N;
  const FlashWindowT<float>& win = *cache->window;
  const int* idx = cache->idx.data() + tok * k;
  const float* hpre = cache->hpre.data() + tok * N;
  float* __restrict ut = u + tok * C;
  std::memcpy(ut, win.base.data() + (tok * d.window + d.pos) * C, sizeof(float) * C);
  float h[16];
  for (int j = 0; j < k; ++j) h[j] = hpre[idx[j]];
  cpu::AxpyWeighted(C, k, h, cache->xa.data() + tok * k * C, C, ut);
}

// Per token: Xa = X[idx] and its rms factor.
XHC_CLONES void TokenGather(const XhcDims& d, const float* x, size_t tok, XhcCache* cache) {
  const int k = d.k, C = d.C;
  float* xa = cache->xa.data() + tok * k * C;
  for (int j = 0; j < k; ++j) {
    std::memcpy(xa + j * C, x + cache->idx[tok * k + j] * C, sizeof(float) * C);
  }
  double ssa, sqa;
  cpu::SumSq(k * C, xa, &ssa, &sqa);
  cache->rstd_a[tok] = static_cast<float>(1.0 / std::sqrt(sqa / (k * C) + kNormEps));
}

// Tokens [t0, t0 + nt): Hres = sinkhorn(res logits), 8 tokens at a time (sinkhorn_batch.h:
// bit for bit the per-token version), and Hpost = 2 sigmoid(post pre-activations).
XHC_CLONES void BlockMixMaps(const XhcConfig& cfg, const XhcDims& d, const XhcParams& P, int t0,
                             int nt, XhcCache* cache) {
  const int k = d.k, K = d.K, Q = d.Q(), kk = k * k;
  const int Rres = d.Rres();
  if (d.has_mix) {
    constexpr int L = cpu::kSinkLanes;
    float z[L * 256], h[L * 256];
    cpu::V8 m[256];
    for (int b0 = t0; b0 < t0 + nt; b0 += L) {
      const int nb = std::min(L, t0 + nt - b0);
      for (int l = 0; l < L; ++l) {
        const size_t tok = static_cast<size_t>(b0 + std::min(l, nb - 1));  // pad: repeat the last
        const float* raw = cache->map_raw.data() + tok * Q;
        const float ra = cache->rstd_a[tok];
        for (int q = 0; q < kk; ++q) z[l * kk + q] = P.res_alpha[0] * ra * raw[q] + P.res_bias[q];
      }
      cpu::SinkhornForward8(k, cfg.sinkhorn_iters, z, h, m);
      std::memcpy(cache->hres.data() + static_cast<size_t>(b0) * kk, h, sizeof(float) * nb * kk);
    }
  }
  for (int tok = t0; tok < t0 + nt; ++tok) {
    const float* raw = cache->map_raw.data() + static_cast<size_t>(tok) * Q;
    const float ra = cache->rstd_a[tok];
    float* hpost = cache->hpost.data() + static_cast<size_t>(tok) * k * K;
    for (int q = 0; q < k * K; ++q) {
      hpost[q] = 2.0f * Sigmoid(P.post_alpha[0] * ra * raw[Rres + q] + P.post_bias[q]);
    }
  }
}

// Per token: temporal augmentation, then mix + write + scatter into X (in place).
XHC_CLONES void TokenPost(const XhcConfig& cfg, const XhcDims& d, const float* const* conv_w,
                          const float* out, float* X, int T, int tok, float* g, XhcCache* cache,
                          bool prefetch_next) {
  const int k = d.k, K = d.K, C = d.C, D = d.D();
  const int t = tok % T;
  float* v = cache->aug.data() + static_cast<size_t>(tok) * K * C;  // aug (K, C)
  std::memcpy(v, out + static_cast<size_t>(tok) * C, sizeof(float) * C);
  if (d.r > 0) {
    cpu::ConvToken(d, conv_w, out + static_cast<size_t>(tok - t) * C, C, t, g);
    cpu::GramSchmidtToken(d, cfg.gram_schmidt, g, v, nullptr);
  }
  // Mix + write + scatter: Xa'[j] = sum_j' Hres[j][j'] Xa[j'] + p_j sum_r Hpost[j][r] aug[r].
  const float* hres = cache->hres.data() + static_cast<size_t>(tok) * k * k;
  const float* hpost = cache->hpost.data() + static_cast<size_t>(tok) * k * K;
  const float* xa = cache->xa.data() + static_cast<size_t>(tok) * k * C;
  // The next token's destination streams: k runs of C floats N*C apart, the pass's only
  // misses (perf: most of TokenPost's time waits on their first write); requested now
  // (a read prefetch, cpu_util.h), they arrive while this token computes.
  if (prefetch_next) {
    for (int j = 0; j < k; ++j) {
      cpu::PrefetchSpanForWrite(C, X + static_cast<size_t>(tok + 1) * D +
                                       cache->idx[static_cast<size_t>(tok + 1) * k + j] * C);
    }
  }
  // Each new row in one sweep: the mixed old rows (or, inside a flash window, where the write
  // adds to the stream without mixing, the old row itself), then the weighted components.
  float coef[kMaxActive + 1 + kMaxConvKernels];
  const float* rows[kMaxActive + 1 + kMaxConvKernels];
  for (int j = 0; j < k; ++j) {
    float* __restrict dst =
        X + static_cast<size_t>(tok) * D + cache->idx[static_cast<size_t>(tok) * k + j] * C;
    const float pj = cache->p[static_cast<size_t>(tok) * k + j];
    const int mixed = d.has_mix ? k : 0;
    for (int jj = 0; jj < mixed; ++jj) coef[jj] = hres[j * k + jj], rows[jj] = xa + jj * C;
    for (int q = 0; q < K; ++q) {
      coef[mixed + q] = pj * hpost[j * K + q], rows[mixed + q] = v + q * C;
    }
    cpu::AddScaledRows(C, mixed + K, coef, rows, d.has_mix ? nullptr : xa + j * C, dst);
  }
}

// xhc_flash XhcPre: the window entry makes one pass over X0 (projections of the router and
// all w read maps, statistics, selection, the entry's read and the later sublayers' base
// readouts); later sublayers touch only the k active streams of the current state.
absl::Status FlashPre(const XhcDims& d, const XhcConfig& cfg, const XhcParams& P, int n,
                      const float* X, float* u, const StackedWeights& map_w, XhcCache* cache) {
  const int D = d.D(), Da = d.Da(), Q = d.Q(), PW = d.N + d.window * d.N;
  if (d.pos == 0) {  // for the window's weight passes (xhc_weights.cc)
    FlashWindowT<float>& win = *cache->window;
    win.pre_alpha.resize(d.window);
    for (int q = 0; q < d.window; ++q) win.pre_alpha[q] = P.window_pre_alpha[q][0];
    std::vector<float>().swap(win.wgrad);
    win.wgrad_taken = 0;
  }
  const StackedWeights proj_w = d.pos == 0 ? StackFlashProjection(d, P) : StackedWeights();
  // Packed once here, read by every token block (skinny_gemm.h), as in XhcPre.
  const cpu::SkinnyWeights proj_pk =
      d.pos == 0 ? cpu::PackForDotRows(proj_w.rows, D, proj_w.w.data(), D) : cpu::SkinnyWeights();
  const cpu::SkinnyWeights map_pk = cpu::PackForDotRows(Q, Da, map_w.w.data(), Da);
  constexpr int kBlock = cpu::kMaxTokens;
  const int num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int t0 = blk * kBlock, nt = std::min(kBlock, n - t0);
    const size_t s0 = static_cast<size_t>(t0);
    if (d.pos == 0) {
      cpu::DotRows(nt, proj_pk, X + s0 * D, D, cache->window->proj.data() + s0 * PW, PW);
    }
    for (int tok = t0; tok < t0 + nt; ++tok) {
      const float* x = X + static_cast<size_t>(tok) * D;
      if (d.pos == 0) TokenFlashEntry(d, P, proj_w.rowsum.data(), x, tok, u, cache);
      CopyFromWindow(d, tok, cache);
      TokenGather(d, x, tok, cache);
      if (d.pos > 0) TokenFlashRead(d, tok, u, cache);
    }
    cpu::DotRows(nt, map_pk, cache->xa.data() + s0 * Da, Da, cache->map_raw.data() + s0 * Q, Q);
    BlockMixMaps(cfg, d, P, t0, nt, cache);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status XhcPre(const XhcConfig& cfg, const XhcParams& P, int B, int T, int C, const float* X,
                    float* u, XhcCache* cache) {
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, C));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (B <= 0 || T <= 0 || !X || !u || !cache) {
    return absl::InvalidArgumentError("XhcPre: empty batch or null buffer");
  }
  ResizeCache(d, B, T, cache);
  if (cfg.type == ResidualType::kHc) return hc::Pre(d, P, B, T, X, u, cache);
  RETURN_IF_ERROR(CheckWindowParams(d, P));
  const int n = B * T, N = d.N, D = d.D(), Da = d.Da(), Q = d.Q();
  RETURN_IF_ERROR(PrepareWindow(d, static_cast<size_t>(n), cache));
  const StackedWeights map_w = StackMaps(d, P);
  if (d.flash) return FlashPre(d, cfg, P, n, X, u, map_w, cache);
  const StackedWeights proj_w = StackProjection(d, P);
  const float* rowsum = proj_w.rowsum.data();
  // Packed once here, read by every token block (skinny_gemm.h).
  const cpu::SkinnyWeights proj_pk = cpu::PackForDotRows(proj_w.rows, D, proj_w.w.data(), D);
  const cpu::SkinnyWeights map_pk = cpu::PackForDotRows(Q, Da, map_w.w.data(), Da);
  // One pass over the state, in blocks of kMaxTokens tokens (1 MiB at N*C = 16384, stays in
  // L2 between the steps): raw projections proj (nt, 2N) = X . [router; pre]^T, then per
  // token stats / maps / selection / dense read / gather, then the raw map projections
  // map_raw (nt, Q) = Xa . [res; post]^T of the just-gathered streams, then Hres / Hpost.
  constexpr int kBlock = cpu::kMaxTokens;
  const int num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int t0 = blk * kBlock, nt = std::min(kBlock, n - t0);
    const size_t s0 = static_cast<size_t>(t0);
    cpu::DotRows(nt, proj_pk, X + s0 * D, D, cache->proj.data() + s0 * 2 * N + proj_w.offset,
                 2 * N);
    for (int tok = t0; tok < t0 + nt; ++tok) {
      TokenPre(d, P, rowsum, X + static_cast<size_t>(tok) * D, tok, u, cache);
    }
    cpu::DotRows(nt, map_pk, cache->xa.data() + s0 * Da, Da, cache->map_raw.data() + s0 * Q, Q);
    BlockMixMaps(cfg, d, P, t0, nt, cache);
  }
  return absl::OkStatus();
}

absl::Status XhcPost(const XhcConfig& cfg, const XhcParams& P, const float* out, float* X,
                     XhcCache* cache) {
  if (!cache || !out || !X) return absl::InvalidArgumentError("XhcPost: null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache->dims.C));
  RETURN_IF_ERROR(CheckCache(d, *cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (cfg.type == ResidualType::kHc) return hc::Post(d, out, X, cache);
  const int T = cache->T_len, n = cache->B * T, C = d.C;
  const float* const* conv_w = P.conv_weight.data();
#pragma omp parallel
  {
    std::vector<float> g(static_cast<size_t>(d.r) * C + 1);
#pragma omp for schedule(dynamic, 16)
    for (int tok = 0; tok < n; ++tok) {
      TokenPost(cfg, d, conv_w, out, X, T, tok, g.data(), cache, tok + 1 < n);
    }
  }
  return absl::OkStatus();
}

}  // namespace xhc::kernels
