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

#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/sinkhorn.h"
#include "kernels/cpu/xhc/temporal_aug.h"
#include "kernels/cpu/xhc/xhc_check.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_stack.h"
#include "runtime/common/status_macros.h"

namespace xhc::kernels {
namespace {

// Per token: statistics, router and read map from the raw projections, selection, dense
// read, gather of the active streams and their rms factor. One pass over the token's N*C.
XHC_CLONES void TokenPre(const XhcDims& d, const XhcParams& P, const float* rowsum, const float* x,
              size_t tok, float* u, XhcCache* cache) {
  const int N = d.N, k = d.k, C = d.C, D = d.D();
  double sum, sumsq;
  cpu::SumSq(D, x, &sum, &sumsq);
  const double mean = sum / D;
  const double var = std::max(0.0, sumsq / D - mean * mean);
  const float rstd_ln = static_cast<float>(1.0 / std::sqrt(var + kNormEps));
  const float rstd = static_cast<float>(1.0 / std::sqrt(sumsq / D + kNormEps));
  cache->mean[tok] = static_cast<float>(mean);
  cache->rstd_ln[tok] = rstd_ln;
  cache->rstd[tok] = rstd;
  const float* proj = cache->proj.data() + tok * 2 * N;
  float* s = cache->s.data() + tok * N;
  float* hpre = cache->hpre.data() + tok * N;
  for (int i = 0; i < N; ++i) {
    s[i] = d.has_router ? Sigmoid(rstd_ln * (proj[i] - static_cast<float>(mean) * rowsum[i]) +
                                  P.router_bias[i])
                        : 0.0f;
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

// Per token: Hres = sinkhorn(res logits), Hpost = 2 sigmoid(post pre-activations).
void TokenMixMaps(const XhcConfig& cfg, const XhcDims& d, const XhcParams& P, size_t tok,
                  XhcCache* cache) {
  const int k = d.k, K = d.K, Q = d.Q();
  const float* raw = cache->map_raw.data() + tok * Q;
  const float ra = cache->rstd_a[tok];
  float z[256];
  for (int q = 0; q < k * k; ++q) z[q] = P.res_alpha[0] * ra * raw[q] + P.res_bias[q];
  SinkhornForward(k, cfg.sinkhorn_iters, z, cache->hres.data() + tok * k * k);
  float* hpost = cache->hpost.data() + tok * k * K;
  for (int q = 0; q < k * K; ++q) {
    hpost[q] = 2.0f * Sigmoid(P.post_alpha[0] * ra * raw[k * k + q] + P.post_bias[q]);
  }
}

// Per token: temporal augmentation, then mix + write + scatter into X (in place).
XHC_CLONES void TokenPost(const XhcConfig& cfg, const XhcDims& d, const float* const* conv_w,
                          const float* out, float* X, int T, int tok, float* g,
                          XhcCache* cache) {
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
  for (int j = 0; j < k; ++j) {
    float* __restrict dst = X + static_cast<size_t>(tok) * D +
                            cache->idx[static_cast<size_t>(tok) * k + j] * C;
    const float pj = cache->p[static_cast<size_t>(tok) * k + j];
    std::memset(dst, 0, sizeof(float) * C);
    for (int jj = 0; jj < k; ++jj) cpu::Axpy(C, hres[j * k + jj], xa + jj * C, dst);
    for (int q = 0; q < K; ++q) cpu::Axpy(C, pj * hpost[j * K + q], v + q * C, dst);
  }
}

}  // namespace

absl::Status XhcPre(const XhcConfig& cfg, const XhcParams& P, int B, int T, int C,
                    const float* X, float* u, XhcCache* cache) {
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, C));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (B <= 0 || T <= 0 || !X || !u || !cache) {
    return absl::InvalidArgumentError("XhcPre: empty batch or null buffer");
  }
  ResizeCache(d, B, T, cache);
  const int n = B * T, N = d.N, D = d.D(), Da = d.Da(), Q = d.Q();
  const StackedWeights proj_w = StackProjection(d, P);
  const StackedWeights map_w = StackMaps(d, P);
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
    for (int tok = t0; tok < t0 + nt; ++tok) TokenMixMaps(cfg, d, P, tok, cache);
  }
  return absl::OkStatus();
}

absl::Status XhcPost(const XhcConfig& cfg, const XhcParams& P, const float* out, float* X,
                     XhcCache* cache) {
  if (!cache || !out || !X) return absl::InvalidArgumentError("XhcPost: null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache->dims.C));
  RETURN_IF_ERROR(CheckCache(d, *cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  const int T = cache->T_len, n = cache->B * T, C = d.C;
  const float* const* conv_w = P.conv_weight.data();
#pragma omp parallel
  {
    std::vector<float> g(static_cast<size_t>(d.r) * C + 1);
#pragma omp for schedule(dynamic, 16)
    for (int tok = 0; tok < n; ++tok) TokenPost(cfg, d, conv_w, out, X, T, tok, g.data(), cache);
  }
  return absl::OkStatus();
}

}  // namespace xhc::kernels
