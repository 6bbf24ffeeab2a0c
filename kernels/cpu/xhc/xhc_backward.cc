// Optimized input-gradient backward of the xHC sublayer (I.1 XhcBackwardOut, I.2
// XhcBackwardInput). The router / read-map input gradient is one sgemm
// dX += dZ (n, 2N) . [router; pre] (2N, N*C) plus per-token scalar corrections of the
// LayerNorm / RMS backward, written as dx = dZ.W - a_t * x + b_t.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "base/status_macros.h"
#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/flash_window.h"
#include "kernels/cpu/xhc/hc_ops.h"
#include "kernels/cpu/xhc/sinkhorn.h"
#include "kernels/cpu/xhc/sinkhorn_batch.h"
#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/state_restore.h"
#include "kernels/cpu/xhc/temporal_aug.h"
#include "kernels/cpu/xhc/xhc_check.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_stack.h"

namespace xhc::kernels {
namespace {

struct OutScratch {
  std::vector<float> daug, g, v, hist;
  // Sinkhorn backward of a block of kSinkLanes tokens (sinkhorn_batch.h): each token's res
  // logits z and dL/dHres, lane-major, and the recomputed steps.
  std::vector<float> sink_z, sink_dh, sink_dz;
  std::vector<cpu::V8, cpu::CacheLineAllocator<cpu::V8>> sink_mats;  // std::allocator: 16-aligned
  OutScratch(const XhcDims& d, int iters)
      : daug(static_cast<size_t>(d.K) * d.C),
        g(static_cast<size_t>(d.r) * d.C + 1),
        v(static_cast<size_t>(d.K) * d.C),
        hist(static_cast<size_t>(d.r) * d.r * d.C + 1),
        sink_z(cpu::kSinkLanes * d.k * d.k),
        sink_dh(sink_z.size()),
        sink_dz(sink_z.size()),
        sink_mats(static_cast<size_t>(2 * iters + 2) * d.k * d.k) {}
};

// Map gradients of one token and d aug; dA_j = dX_new[tok, idx_j] read in place. The res
// logits' gradient is left to BlockSinkhornBackward: this stashes the token's logits and
// dL/dHres in lane `lane` of the block's Sinkhorn scratch and zeroes its dz.
XHC_CLONES void TokenMapGrads(const XhcDims& d, const XhcParams& P, const float* dxt, size_t tok,
                              int lane, XhcCache* cache, OutScratch* s) {
  const int k = d.k, K = d.K, C = d.C, N = d.N, Q = d.Q();
  const float* aug = cache->aug.data() + tok * K * C;
  const float* xa = cache->xa.data() + tok * k * C;
  const float* hpost = cache->hpost.data() + tok * k * K;
  const float* p = cache->p.data() + tok * k;
  const int* idx = cache->idx.data() + tok * k;
  float* dz = cache->dz_map.data() + tok * Q;
  const int kk = k * k;
  float* dhres = s->sink_dh.data() + lane * kk;
  float dp[256];
  float coef[kMaxConvKernels + 1][kMaxActive];  // d aug_q = sum_j coef[q][j] dA_j
  const float* dA_rows[kMaxActive];
  for (int j = 0; j < k; ++j) {
    const float* dA = dxt + idx[j] * C;
    dA_rows[j] = dA;
    dp[j] = 0;
    for (int q = 0; q < K; ++q) {
      const float dot = cpu::Dot(C, aug + q * C, dA);
      const float h = hpost[j * K + q];
      dp[j] += h * dot;
      dz[d.Rres() + j * K + q] = p[j] * dot * h * (1.0f - 0.5f * h);  // H = 2 sigmoid(z)
      coef[q][j] = p[j] * h;
    }
    for (int jj = 0; jj < k && d.has_mix; ++jj) dhres[j * k + jj] = cpu::Dot(C, dA, xa + jj * C);
  }
  // Each component's gradient in one sweep over the k rows (j in order, from zero).
  for (int q = 0; q < K; ++q) {
    cpu::AddScaledRows(C, k, coef[q], dA_rows, nullptr, s->daug.data() + q * C);
  }
  if (d.has_mix) {
    const float ra = cache->rstd_a[tok];
    float* z = s->sink_z.data() + lane * kk;
    for (int q = 0; q < kk; ++q) {
      z[q] = P.res_alpha[0] * ra * cache->map_raw[tok * Q + q] + P.res_bias[q];
      dz[q] = 0;
    }
  }
  float* dzr = cache->dz_proj.data() + tok * 2 * N;
  std::fill(dzr, dzr + N, 0.0f);
  if (d.flash) {  // one routing decision per window: its entry turns dp into router dz
    for (int j = d.m; j < k; ++j) cache->window->dp[tok * k + j] += dp[j];
    return;
  }
  if (!d.has_router) return;
  for (int j = d.m; j < k; ++j) {
    const float sv = cache->s[tok * N + idx[j]];
    dzr[idx[j]] += dp[j] * sv * (1.0f - sv);
  }
}

// dz of the res logits of tokens [b0, b0 + nb), nb <= kSinkLanes, from the logits and
// dL/dHres TokenMapGrads stashed (lanes past nb repeat lane nb - 1; their results are dropped).
XHC_CLONES void BlockSinkhornBackward(const XhcConfig& cfg, const XhcDims& d, int b0, int nb,
                                      XhcCache* cache, OutScratch* s) {
  const int kk = d.k * d.k, Q = d.Q();
  for (int l = nb; l < cpu::kSinkLanes; ++l) {
    std::copy_n(s->sink_z.data() + (nb - 1) * kk, kk, s->sink_z.data() + l * kk);
    std::copy_n(s->sink_dh.data() + (nb - 1) * kk, kk, s->sink_dh.data() + l * kk);
  }
  for (int l = 0; l < cpu::kSinkLanes; ++l) {  // dz += ...: start from the tokens' dz (zero)
    std::copy_n(cache->dz_map.data() + static_cast<size_t>(b0 + std::min(l, nb - 1)) * Q, kk,
                s->sink_dz.data() + l * kk);
  }
  cpu::SinkhornBackward8(d.k, cfg.sinkhorn_iters, s->sink_z.data(), s->sink_dh.data(),
                         s->sink_dz.data(), s->sink_mats.data());
  for (int l = 0; l < nb; ++l) {
    std::copy_n(s->sink_dz.data() + l * kk, kk,
                cache->dz_map.data() + static_cast<size_t>(b0 + l) * Q);
  }
}

// Convolution backward into d_out[tok]: out[t] fed g_j[t + tau] through w_j[tau].
XHC_CLONES void TokenConvBackward(const XhcDims& d, const float* const* conv_w, const float* dg_all,
                                  int T, int tok, float* d_out) {
  const int t = tok % T, C = d.C;
  float* dst = d_out + static_cast<size_t>(tok) * C;
  for (int j = 0; j < d.r; ++j) {  // += sum over tau (in order) of w_j[tau] * dg_j[tok + tau]
    const int taus = std::min(d.kernels[j], T - t);
    cpu::AccumulateProducts(C, taus, conv_w[j], C,
                            dg_all + (static_cast<size_t>(tok) * d.r + j) * C,
                            static_cast<ptrdiff_t>(d.r) * C, dst, true);
  }
}

}  // namespace

absl::Status XhcBackwardOut(const XhcConfig& cfg, const XhcParams& P, const float* dX_new,
                            XhcCache* cache, float* d_out) {
  if (!cache || !dX_new || !d_out) return absl::InvalidArgumentError("null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache->dims.C));
  RETURN_IF_ERROR(CheckCache(d, *cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (cfg.type == ResidualType::kHc) return hc::BackwardOut(d, dX_new, cache, d_out);
  const int T = cache->T_len, n = cache->B * T, K = d.K, C = d.C, D = d.D();
  const float* const* conv_w = P.conv_weight.data();
  // Blocks of kSinkLanes tokens: the block's Sinkhorn backward runs once, 8 tokens wide.
  // A thread takes kOutChunk tokens (whole blocks) at a time.
  constexpr int L = cpu::kSinkLanes, kOutChunk = 4 * L;
  const int num_chunks = (n + kOutChunk - 1) / kOutChunk;
  // The convolution backward of token tok reads dg of tokens tok .. tok + widest - 1 of its
  // sequence: ready once the chunk holding tok has run, unless they reach past its end.
  const int widest = d.Widest();
  auto conv_inputs_before = [&](int tok, int end) {
    return tok + std::min(widest, T - tok % T) <= end;
  };
#pragma omp parallel
  {
    OutScratch s(d, cfg.sinkhorn_iters);
#pragma omp for schedule(dynamic, 1)
    for (int chunk = 0; chunk < num_chunks; ++chunk) {
      const int c0 = chunk * kOutChunk, c1 = std::min(n, c0 + kOutChunk);
      for (int b0 = c0; b0 < c1; b0 += L) {
        const int nb = std::min(L, c1 - b0);
        for (int tok = b0; tok < b0 + nb; ++tok) {
          TokenMapGrads(d, P, dX_new + static_cast<size_t>(tok) * D, tok, tok - b0, cache, &s);
          if (d.r > 0) {  // recompute the Gram-Schmidt history from out = aug[0]
            const int t = tok % T;
            const float* aug_seq = cache->aug.data() + static_cast<size_t>(tok - t) * K * C;
            cpu::ConvToken(d, conv_w, aug_seq, K * C, t, s.g.data());
            std::memcpy(s.v.data(), aug_seq + static_cast<size_t>(t) * K * C, sizeof(float) * C);
            cpu::GramSchmidtToken(d, cfg.gram_schmidt, s.g.data(), s.v.data(), s.hist.data());
            cpu::GramSchmidtBackwardToken(d, cfg.gram_schmidt, s.v.data(), s.g.data(),
                                          s.hist.data(), s.daug.data(),
                                          cache->dg.data() + static_cast<size_t>(tok) * d.r * C);
          }
          std::memcpy(d_out + static_cast<size_t>(tok) * C, s.daug.data(), sizeof(float) * C);
        }
        if (d.has_mix) BlockSinkhornBackward(cfg, d, b0, nb, cache, &s);
      }
      // Convolution backward (out[t] fed g_j[t + tau] through w_j[tau], same sequence only)
      // of the chunk's tokens whose dg rows all lie in the chunk, while they are in cache:
      // all but its last widest - 1 (a separate pass over every token took 8 of bwd_out's
      // 47 ms at xhc_bench's shape, docs/design/fused-xhc-sublayer.md). The same calls in the
      // same order per token as the pass below, so the same bits.
      for (int tok = c0; tok < c1 && d.r > 0; ++tok) {
        if (conv_inputs_before(tok, c1)) {
          TokenConvBackward(d, conv_w, cache->dg.data(), T, tok, d_out);
        }
      }
    }
    if (d.r > 0) {  // the rest, once every chunk's dg is written (the barrier above)
#pragma omp for schedule(dynamic, 16)
      for (int chunk = 0; chunk < num_chunks; ++chunk) {
        const int c0 = chunk * kOutChunk, c1 = std::min(n, c0 + kOutChunk);
        for (int tok = std::max(c0, c1 - widest + 1); tok < c1; ++tok) {
          if (!conv_inputs_before(tok, c1)) {
            TokenConvBackward(d, conv_w, cache->dg.data(), T, tok, d_out);
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// Coefficients of the res / post map backward of one token: zm = alpha * ra * dz (the sgemm
// left factor) and the rms correction ra^2 / Da * sum_q dz_q (z_q - b_q), returned.
float TokenMapCoefficients(const XhcDims& d, const XhcParams& P, const XhcCache& cache, size_t tok,
                           float* zm) {
  const int kk = d.Rres(), Q = d.Q();
  const float ra = cache.rstd_a[tok];
  const float* dz = cache.dz_map.data() + tok * Q;
  const float* raw = cache.map_raw.data() + tok * Q;
  float corr = 0;
  for (int q = 0; q < Q; ++q) {
    const float alpha = q < kk ? P.res_alpha[0] : P.post_alpha[0];
    zm[q] = alpha * ra * dz[q];
    corr += zm[q] * raw[q];
  }
  return corr * ra * ra / d.Da();  // ra^2 / Da * sum dz (z - b), z - b = alpha ra raw
}

// Read-map and router coefficients of one token: writes zc (the sgemm left factor, stacked
// like StackProjection) and the stashed read-map dz; returns {a_t, b_t} of dx = zc.W - a x + b.
XHC_CLONES std::pair<float, float> TokenProjCoefficients(const XhcDims& d, const XhcParams& P,
                                                         const float* rowsum, const float* x,
                                                         const float* du, size_t tok,
                                                         XhcCache* cache, float* zc) {
  const int N = d.N, C = d.C, D = d.D();
  const float* hpre = cache->hpre.data() + tok * N;
  const float* proj = cache->proj.data() + tok * 2 * N;
  float* dzr = cache->dz_proj.data() + tok * 2 * N;
  float* dzp = dzr + N;
  const float rstd = cache->rstd[tok], alpha = P.pre_alpha[0];
  float a = 0, b = 0;
  float* zc_pre = zc + (d.has_router ? N : 0);
  cpu::MultiDot(C, du, N, x, C, dzp);  // <du, x_i> for every stream in one sweep
  for (int i = 0; i < N; ++i) {
    dzp[i] = dzp[i] * hpre[i] * (1.0f - hpre[i]);
    zc_pre[i] = dzp[i] * alpha * rstd;
    a += zc_pre[i] * proj[N + i];  // dz (z - b) with z - b = alpha rstd P
  }
  a *= rstd * rstd / D;
  if (d.has_router) {
    const float rl = cache->rstd_ln[tok], mean = cache->mean[tok];
    float mg = 0, mgl = 0;
    for (int i = 0; i < N; ++i) {
      zc[i] = dzr[i] * rl;
      mg += dzr[i] * rowsum[i];
      mgl += zc[i] * (proj[i] - mean * rowsum[i]);  // dz (z - b), z - b = rl (P - mean rs)
    }
    mg /= D, mgl /= D;
    a += rl * rl * mgl;
    b = rl * rl * mgl * mean - rl * mg;
  }
  return {a, b};
}

// xhc_flash counterpart of TokenProjCoefficients. The streams outside the active set are X0's
// for the whole window, so a later sublayer q only stashes du_q and its read map's dz of the
// active streams (d hpre_q,j = <du_q, Xa_j>, the current streams); the entry (pos 0, last in
// backward) then forms every sublayer's dz of the other streams (<du_q, X0_i>) in its one pass
// over X0, and the coefficients of the one projection of X0: router (from the window's dp) and
// all w read maps.
XHC_CLONES std::pair<float, float> TokenFlashProjCoefficients(const XhcDims& d, const XhcParams& P,
                                                              const float* rowsum, const float* x0,
                                                              const float* du, size_t tok,
                                                              XhcCache* cache, float* zc) {
  const int N = d.N, k = d.k, C = d.C, D = d.D(), w = d.window, PW = N + w * N;
  FlashWindowT<float>& win = *cache->window;
  const int* idx = cache->idx.data() + tok * k;
  const float* xa = cache->xa.data() + tok * k * C;
  if (d.pos != 0) {
    const float* hq = win.hpre.data() + (tok * w + d.pos) * N;
    float* dzq = win.dz_pre.data() + (tok * w + d.pos) * N;
    for (int j = 0; j < k; ++j) {
      const int i = idx[j];
      dzq[i] = cpu::Dot(C, du, xa + j * C) * hq[i] * (1.0f - hq[i]);
    }
    std::memcpy(win.du.data() + (tok * w + d.pos) * C, du, sizeof(float) * C);
    return {0.0f, 0.0f};
  }
  bool active[256] = {};
  for (int j = 0; j < k; ++j) active[idx[j]] = true;
  float dh[256];
  for (int q = 0; q < w; ++q) {
    const float* duq = q == 0 ? du : win.du.data() + (tok * w + q) * C;
    const float* hq = win.hpre.data() + (tok * w + q) * N;
    float* dzq = win.dz_pre.data() + (tok * w + q) * N;
    cpu::MultiDot(C, duq, N, x0, C, dh);
    if (q == 0) {
      for (int j = 0; j < k; ++j) dh[idx[j]] = cpu::Dot(C, du, xa + j * C);
    }
    for (int i = 0; i < N; ++i) {
      if (q == 0 || !active[i]) dzq[i] = dh[i] * hq[i] * (1.0f - hq[i]);
    }
  }
  const float rstd = win.rstd[tok];
  const float* proj = win.proj.data() + tok * PW;
  float a = 0, b = 0;
  for (int q = 0; q < w; ++q) {
    const float alpha = P.window_pre_alpha[q][0];
    const float* dz = win.dz_pre.data() + (tok * w + q) * N;
    for (int i = 0; i < N; ++i) {
      zc[N + q * N + i] = dz[i] * alpha * rstd;
      a += zc[N + q * N + i] * proj[N + q * N + i];
    }
  }
  a *= rstd * rstd / D;
  float* dzr = win.dz_router.data() + tok * N;
  std::fill(dzr, dzr + N, 0.0f);
  for (int j = d.m; j < k; ++j) {
    const float sv = cache->s[tok * N + idx[j]];
    dzr[idx[j]] += win.dp[tok * k + j] * sv * (1.0f - sv);
  }
  std::copy_n(dzr, N, cache->dz_proj.data() + tok * 2 * N);
  const float rl = win.rstd_ln[tok], mean = win.mean[tok];
  float mg = 0, mgl = 0;
  for (int i = 0; i < N; ++i) {
    zc[i] = dzr[i] * rl;
    mg += dzr[i] * rowsum[i];
    mgl += zc[i] * (proj[i] - mean * rowsum[i]);
  }
  mg /= D, mgl /= D;
  a += rl * rl * mgl;
  b = rl * rl * mgl * mean - rl * mg;
  return {a, b};
}

// The reads of the streams outside the active set whose gradient a token's input pass adds:
// the sublayer's own (xhc, mhc), none (a later sublayer of an xhc_flash window: those streams
// are X0's, so the entry adds them), or every window sublayer's in order (the entry).
struct InactiveReads {
  int n = 0;
  const float* du[8];  // d loss / d u_q (C)
  const float* h[8];   // read map hpre_q (N)
};

// Writes every stream of dX[tok] except the sgemm term: pass-through plus the reads' dense-read
// terms and the scalar corrections (inactive; untouched when `reads` is empty), and the own
// dense read, the corrections, mixing and map gradients (active). row: C floats of scratch.
XHC_CLONES void TokenWriteInputGrad(const XhcDims& d, const XhcCache& cache, const float* x,
                                    const float* du, const InactiveReads& reads,
                                    const float* dxa_maps, float corr_a, std::pair<float, float> ab,
                                    size_t tok, float* dxt, float* dA, float* row,
                                    bool prefetch_next) {
  const int N = d.N, k = d.k, C = d.C, D = d.D();
  const int* idx = cache.idx.data() + tok * k;
  const float* hpre = cache.hpre.data() + tok * N;
  const float* hres = cache.hres.data() + tok * k * k;
  const float* xa = cache.xa.data() + tok * k * C;
  const float a = ab.first, b = ab.second;
  bool active[256] = {};
  for (int j = 0; j < k; ++j) {
    active[idx[j]] = true;
    std::memcpy(dA + j * C, dxt + idx[j] * C, sizeof(float) * C);
  }
  for (int i = 0; i < N; ++i) {
    if (!active[i] && reads.n == 0) continue;
    float* __restrict dst = dxt + i * C;
    const float* __restrict xi = x + i * C;
    const float h = hpre[i];
    // The next token's stream i of X_in and dX: this pass is where both first arrive from
    // memory; requested one token ahead, they arrive while this token computes, into L2
    // (docs/design/fused-xhc-sublayer.md). `prefetch_next`: the next token is in this block.
    if (prefetch_next) cpu::PrefetchL2(C, xi + D, dst + D);
    if (active[i]) {
      for (int c = 0; c < C; ++c) dst[c] = h * du[c] - a * xi[c] + b;
    } else if (reads.n == 1) {
      const float hr = reads.h[0][i];
      const float* __restrict dr = reads.du[0];
      for (int c = 0; c < C; ++c) dst[c] += hr * dr[c] - a * xi[c] + b;
    } else {  // sum_q hpre_q,i du_q, q in order, then as above
      float* __restrict sum = row;
      const float h0 = reads.h[0][i];
      for (int c = 0; c < C; ++c) sum[c] = h0 * reads.du[0][c];
      for (int q = 1; q < reads.n; ++q) cpu::Axpy(C, reads.h[q][i], reads.du[q], sum);
      for (int c = 0; c < C; ++c) dst[c] += sum[c] - a * xi[c] + b;
    }
  }
  float coef[kMaxActive];
  const float* rows[kMaxActive];
  for (int j = 0; j < k; ++j) rows[j] = dA + j * C;
  for (int jj = 0; jj < k; ++jj) {
    float* __restrict dst = dxt + idx[jj] * C;
    const float* __restrict m = dxa_maps + jj * C;
    const float* __restrict xj = xa + jj * C;
    for (int c = 0; c < C; ++c) dst[c] += m[c] - corr_a * xj[c];
    if (!d.has_mix) {  // inside a flash window the write is added: identity on the stream
      cpu::Axpy(C, 1.0f, dA + jj * C, dst);
      continue;
    }
    for (int j = 0; j < k; ++j) coef[j] = hres[j * k + jj];
    cpu::AddScaledRows(C, k, coef, rows, dst, dst);  // the k mixing terms in one sweep
  }
}

InactiveReads InactiveReadsOf(const XhcDims& d, const XhcCache& cache, size_t tok,
                              const float* du) {
  InactiveReads r;
  if (!d.flash) {
    r.n = 1, r.du[0] = du, r.h[0] = cache.hpre.data() + tok * d.N;
  } else if (d.pos == 0) {
    const FlashWindowT<float>& win = *cache.window;
    r.n = d.window;
    for (int q = 0; q < d.window; ++q) {
      r.du[q] = q == 0 ? du : win.du.data() + (tok * d.window + q) * d.C;
      r.h[q] = win.hpre.data() + (tok * d.window + q) * d.N;
    }
  }
  return r;
}

// dX[tok] (D) += sum_r z_r W_r over the rows whose coefficient is nonzero: the router's rows,
// where only the routed streams' (k - m of N per token) are; the others' dz is exactly 0,
// since the gradient reaches the router only through the selected p_j. The nonzero rows are
// added in one sweep over dX[tok] (AddScaledRows: the same additions in row order as one
// sweep per row, which read and wrote the token's 64 KiB of dX once per row;
// docs/design/fused-xhc-sublayer.md).
XHC_CLONES void TokenAddSparseRows(int rows, int D, const float* z, const float* W, float* dxt) {
  float h[256];
  const float* x[256];
  int m = 0;
  for (int r = 0; r < rows; ++r) {
    if (z[r] == 0.0f) continue;
    h[m] = z[r], x[m++] = W + static_cast<size_t>(r) * D;
  }
  if (m > 0) cpu::AddScaledRows(D, m, h, x, dxt, dxt);
}

// XhcBackwardInput's pass; with `restore`, X_in is first the sublayer's output and each
// token's active streams are put back (RestoreToken) just before the pass reads the token.
absl::Status BackwardInputPass(const XhcConfig& cfg, const XhcParams& P, float* restore,
                               const float* X_in, const float* du, float* dX, XhcCache* cache) {
  if (!cache || !X_in || !du || !dX) return absl::InvalidArgumentError("null buffer");
  if (restore && cfg.type == ResidualType::kXhcFlash) {
    return absl::InvalidArgumentError(
        "XhcBackwardInputRestoring: an xhc_flash sublayer takes its window's entry state (restore "
        "it with the entry's cache, then XhcBackwardInput)");
  }
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache->dims.C));
  RETURN_IF_ERROR(CheckCache(d, *cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (cfg.type == ResidualType::kHc) {
    if (restore) RestoreInput(*cache, restore);
    return hc::BackwardInput(d, P, X_in, du, dX, cache);
  }
  if (d.flash && !cache->window) return absl::FailedPreconditionError("xhc_flash: no window");
  const int n = cache->B * cache->T_len, C = d.C, D = d.D(), Da = d.Da(), Q = d.Q();
  if (d.flash && d.window > 8) return absl::InvalidArgumentError("xhc_flash: window > 8");
  if (d.flash) {  // the later sublayers' du, for the entry (TokenFlashProjCoefficients)
    std::vector<float>& win_du = cache->window->du;
    const size_t size = static_cast<size_t>(n) * d.window * C;
    if (d.pos == d.window - 1) win_du.resize(size);  // the window's first backward
    if (win_du.size() != size) {
      return absl::FailedPreconditionError(
          "xhc_flash: a window's input backward runs from its last sublayer to its entry");
    }
  }
  // xhc_flash: only the window entry projects from the state (X0, for the whole window).
  const StackedWeights proj_w = !d.flash     ? StackProjection(d, P)
                                : d.pos == 0 ? StackFlashProjection(d, P)
                                             : StackedWeights();
  const StackedWeights map_w = StackMaps(d, P);
  const int R = proj_w.rows;
  // The router's rows (stacked first) are added per token, only those with a nonzero
  // coefficient (TokenAddSparseRows); the block product covers the read-map rows: per token
  // N + (k - m) rows of work instead of 2N (or N + wN under xhc_flash).
  const int router_rows = R > 0 && d.has_router ? d.N : 0;
  // The block products' W, packed once for all blocks (skinny_gemm.h).
  const cpu::SkinnyWeights map_pk = cpu::PackForAxpyRows(Q, Da, map_w.w.data(), Da);
  const float* pre_rows = proj_w.w.data() + static_cast<size_t>(router_rows) * D;
  const cpu::SkinnyWeights proj_pk = R > router_rows
                                         ? cpu::PackForAxpyRows(R - router_rows, D, pre_rows, D)
                                         : cpu::SkinnyWeights();
  // One pass over X_in and dX in blocks of kMaxTokens tokens (X_in and dX blocks stay in
  // cache between the steps):
  //  1. res / post map coefficients zm (nt, Q);
  //  2. map path of the active streams dxa (nt, k*C) = zm . [res; post] (Q, k*C);
  //  3. per token: read-map / router coefficients zc, and every term of dX[tok] but the
  //     projection one;
  //  4. router / read-map path dX (nt, N*C) += zc (nt, R) . [router; pre] (R, N*C): the router
  //     rows per token in step 3 (sparse), the read-map rows as one block product.
  constexpr int kBlock = cpu::kMaxTokens;
  const int num_blocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel
  {
    std::vector<float> dA(static_cast<size_t>(Da)), dxa(static_cast<size_t>(kBlock) * Da);
    std::vector<float> zm(static_cast<size_t>(kBlock) * Q), zc(static_cast<size_t>(kBlock) * R);
    std::vector<float> row(static_cast<size_t>(C));
    float corr_a[kBlock];
#pragma omp for schedule(dynamic, 1)
    for (int blk = 0; blk < num_blocks; ++blk) {
      const int t0 = blk * kBlock, nt = std::min(kBlock, n - t0);
      for (int i = 0; i < nt; ++i) {
        corr_a[i] =
            TokenMapCoefficients(d, P, *cache, t0 + i, zm.data() + static_cast<size_t>(i) * Q);
      }
      cpu::AxpyRows(nt, map_pk, zm.data(), Q, dxa.data(), Da, false);
      for (int i = 0; i < nt; ++i) {
        const int tok = t0 + i;
        const size_t off = static_cast<size_t>(tok) * D;
        const float* dut = du + static_cast<size_t>(tok) * C;
        if (restore) RestoreToken(*cache, tok, restore + off);
        float* zct = zc.data() + static_cast<size_t>(i) * R;
        const float* rowsum = proj_w.rowsum.data();
        const auto ab =
            d.flash ? TokenFlashProjCoefficients(d, P, rowsum, X_in + off, dut, tok, cache, zct)
                    : TokenProjCoefficients(d, P, rowsum, X_in + off, dut, tok, cache, zct);
        TokenWriteInputGrad(d, *cache, X_in + off, dut, InactiveReadsOf(d, *cache, tok, dut),
                            dxa.data() + static_cast<size_t>(i) * Da, corr_a[i], ab, tok, dX + off,
                            dA.data(), row.data(), i + 1 < nt);
        TokenAddSparseRows(router_rows, D, zct, proj_w.w.data(), dX + off);
      }
      if (R > router_rows) {
        cpu::AxpyRows(nt, proj_pk, zc.data() + router_rows, R, dX + static_cast<size_t>(t0) * D, D,
                      true);
      }
    }
  }
  if (d.flash && d.pos == 0) cache->window->entry_backward_done = 1;
  return absl::OkStatus();
}

}  // namespace

absl::Status XhcBackwardInput(const XhcConfig& cfg, const XhcParams& P, const float* X_in,
                              const float* du, float* dX, XhcCache* cache) {
  return BackwardInputPass(cfg, P, nullptr, X_in, du, dX, cache);
}

absl::Status XhcBackwardInputRestoring(const XhcConfig& cfg, const XhcParams& P, float* X,
                                       const float* du, float* dX, XhcCache* cache) {
  if (!X) return absl::InvalidArgumentError("null buffer");
  return BackwardInputPass(cfg, P, X, X, du, dX, cache);
}

}  // namespace xhc::kernels
