// Reference backward of the xHC sublayer: the chain rule written out token by token.

#include <vector>

#include "kernels/cpu/xhc/flash_window.h"
#include "kernels/cpu/xhc/hc_reference.h"
#include "kernels/cpu/xhc/xhc_reference.h"

namespace xhc::kernels::ref {
namespace {

// Backward of RefGramSchmidt: dv (K, C) holds d loss / d aug on entry; on exit dv[0] holds the
// direct d loss / d out and dg (r, C) the gradient w.r.t. the conv outputs.
template <typename R>
void RefGramSchmidtBackward(const XhcDims& d, bool orthogonalise, const R* v, const R* hist, R* dv,
                            R* dg) {
  const int C = d.C;
  std::vector<R> cur(C);
  for (int j = d.r; j >= 1; --j) {
    for (int c = 0; c < C; ++c) cur[c] = dv[j * C + c];
    if (orthogonalise) {
      for (int i = j - 1; i >= 0; --i) {
        // Step g' = g - coef v_i with coef = <g, v_i> / S, S = <v_i, v_i> + eps.
        const R* gb = hist + ((j - 1) * d.r + i) * C;
        const R* vi = v + i * C;
        const R S = Dot(C, vi, vi) + R(kGramSchmidtEps);
        const R coef = Dot(C, gb, vi) / S;
        const R a = Dot(C, cur.data(), vi);
        for (int c = 0; c < C; ++c) {
          dv[i * C + c] += -coef * cur[c] - a * (gb[c] / S - R(2) * coef * vi[c] / S);
        }
        for (int c = 0; c < C; ++c) cur[c] -= a * vi[c] / S;
      }
    }
    for (int c = 0; c < C; ++c) dg[(j - 1) * C + c] = cur[c];
  }
}

// Per-token part of XhcBackwardOut: map gradients and d aug. dA is (k, C).
template <typename R>
void RefTokenBackwardOut(const XhcConfig& cfg, const XhcDims& d, const XhcParamsT<R>& P, size_t tok,
                         const R* dA, XhcCacheT<R>* cache, R* daug) {
  const int k = d.k, K = d.K, C = d.C, N = d.N, Q = d.Q();
  const R* aug = cache->aug.data() + tok * K * C;
  const R* xa = cache->xa.data() + tok * k * C;
  const R* hpost = cache->hpost.data() + tok * k * K;
  const R* p = cache->p.data() + tok * k;
  std::vector<R> dhres(k * k), z(k * k), work;
  for (int q = 0; q < K * C; ++q) daug[q] = 0;
  std::vector<R> dp(k, 0);
  R* dz = cache->dz_map.data() + tok * Q;
  for (int j = 0; j < k; ++j) {
    for (int q = 0; q < K; ++q) {
      const R dot = Dot(C, aug + q * C, dA + j * C);
      const R h = hpost[j * K + q];
      dp[j] += h * dot;
      dz[d.Rres() + j * K + q] = p[j] * dot * h * (R(1) - h / R(2));  // H = 2 sigmoid(z)
      for (int c = 0; c < C; ++c) daug[q * C + c] += p[j] * h * dA[j * C + c];
    }
    for (int jj = 0; jj < k && d.has_mix; ++jj) dhres[j * k + jj] = Dot(C, dA + j * C, xa + jj * C);
  }
  const R ra = cache->rstd_a[tok];
  if (d.has_mix) {
    for (int q = 0; q < k * k; ++q) {
      z[q] = P.res_alpha[0] * ra * cache->map_raw[tok * Q + q] + P.res_bias[q];
      dz[q] = 0;
    }
    SinkhornBackward(k, cfg.sinkhorn_iters, z.data(), dhres.data(), dz, work);
  }
  R* dzr = cache->dz_proj.data() + tok * 2 * N;
  for (int i = 0; i < N; ++i) dzr[i] = 0;
  if (d.flash) {  // the window's one routing decision: its entry turns dp into router dz
    for (int j = d.m; j < k; ++j) cache->window->dp[tok * k + j] += dp[j];
    return;
  }
  if (!d.has_router) return;
  for (int j = d.m; j < k; ++j) {  // p_j = s_idx_j, s = sigmoid(z_router)
    const int i = cache->idx[tok * k + j];
    const R s = cache->s[tok * N + i];
    dzr[i] += dp[j] * s * (R(1) - s);
  }
}

}  // namespace

template <typename R>
absl::Status XhcBackwardOut(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* dX_new,
                            XhcCacheT<R>* cache, R* d_out) {
  if (!cache || !dX_new || !d_out) return absl::InvalidArgumentError("null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache->dims.C));
  RETURN_IF_ERROR(CheckCache(d, *cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (cfg.type == ResidualType::kHc) return HcBackwardOut(d, dX_new, cache, d_out);
  const int k = d.k, K = d.K, C = d.C, D = d.D(), T_len = cache->T_len;
  const size_t n = static_cast<size_t>(cache->B) * T_len;
  std::vector<R> dA(k * C), daug(K * C), g(d.r * C + 1), v(K * C), hist(d.r * d.r * C + 1);
  std::vector<R> out_s(static_cast<size_t>(T_len) * C);
  for (size_t tok = 0; tok < n; ++tok) {
    for (int j = 0; j < k; ++j) {  // dA[j] = dX_new[tok, idx_j]
      const int i = cache->idx[tok * k + j];
      for (int c = 0; c < C; ++c) dA[j * C + c] = dX_new[tok * D + i * C + c];
    }
    RefTokenBackwardOut(cfg, d, P, tok, dA.data(), cache, daug.data());
    // Recompute the Gram-Schmidt history from out = aug[0].
    const int b = static_cast<int>(tok / T_len), t = static_cast<int>(tok % T_len);
    if (t == 0) {  // out (T, C) of this sequence, from aug[tok'][0] = out[tok']
      for (int tt = 0; tt < T_len; ++tt) {
        for (int c = 0; c < C; ++c) {
          out_s[tt * C + c] = cache->aug[(static_cast<size_t>(b) * T_len + tt) * K * C + c];
        }
      }
    }
    RefConv(d, P, out_s.data(), t, g.data());
    for (int c = 0; c < C; ++c) v[c] = out_s[t * C + c];
    RefGramSchmidt(d, cfg.gram_schmidt, g.data(), v.data(), hist.data());
    RefGramSchmidtBackward(d, cfg.gram_schmidt, v.data(), hist.data(), daug.data(),
                           cache->dg.data() + tok * d.r * C);
    for (int c = 0; c < C; ++c) d_out[tok * C + c] = daug[c];
  }
  // Convolution backward: out[t] fed g_j[t + tau] with weight w_j[tau] (same sequence only).
  for (size_t tok = 0; tok < n; ++tok) {
    const int t = static_cast<int>(tok % T_len);
    for (int j = 0; j < d.r; ++j) {
      for (int tau = 0; tau < d.kernels[j] && t + tau < T_len; ++tau) {
        const R* dgj = cache->dg.data() + ((tok + tau) * d.r + j) * C;
        for (int c = 0; c < C; ++c) d_out[tok * C + c] += P.conv_weight[j][tau * C + c] * dgj[c];
      }
    }
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status XhcBackwardInput(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* X_in,
                              const R* du, R* dX, XhcCacheT<R>* cache) {
  if (!cache || !X_in || !du || !dX) return absl::InvalidArgumentError("null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache->dims.C));
  RETURN_IF_ERROR(CheckCache(d, *cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (cfg.type == ResidualType::kHc) return HcBackwardInput(d, P, X_in, du, dX, cache);
  const int N = d.N, k = d.k, K = d.K, C = d.C, D = d.D(), Da = d.Da(), Q = d.Q();
  const size_t n = static_cast<size_t>(cache->B) * cache->T_len;
  std::vector<R> dA(Da), dxa(Da), gxa(Da), xan(Da), dflat(D), y(D), ln(D), gy(D), gln(D), xq(D);
  FlashWindowT<R>* win = cache->window.get();
  const int w = d.window, Rres = d.Rres();
  for (size_t tok = 0; tok < n; ++tok) {
    // X_in[tok] is (N, C): this sublayer's input state, except under xhc_flash, where it is
    // the window's entry state X0: the current active streams are then cache->xa (only those
    // changed inside the window), the others are X0's.
    const R* x0 = X_in + tok * D;
    for (int e = 0; e < D; ++e) xq[e] = x0[e];
    const R* x = xq.data();
    const int* idx = cache->idx.data() + tok * k;
    for (int j = 0; j < k; ++j) {
      for (int c = 0; c < C; ++c) xq[idx[j] * C + c] = cache->xa[(tok * k + j) * C + c];
    }
    const R* hpre = cache->hpre.data() + tok * N;
    for (int j = 0; j < k; ++j)
      for (int c = 0; c < C; ++c) dA[j * C + c] = dX[tok * D + idx[j] * C + c];
    // Mixing: Xa'[j] = sum_j' Hres[j][j'] Xa[j'] + ...
    const R* hres = cache->hres.data() + tok * k * k;
    for (int jj = 0; jj < k; ++jj) {
      for (int c = 0; c < C; ++c) {
        R acc = d.has_mix ? R(0) : dA[jj * C + c];  // no mixing inside a flash window
        for (int j = 0; j < k && d.has_mix; ++j) acc += hres[j * k + jj] * dA[j * C + c];
        dxa[jj * C + c] = acc;
      }
    }
    // Res / post maps read xa = rms(vec(Xa)).
    const R* dz = cache->dz_map.data() + tok * Q;
    for (int e = 0; e < Da; ++e) gxa[e] = 0;
    for (int q = 0; q < Q; ++q) {
      const R* wq = (q < Rres) ? P.res_weight + static_cast<size_t>(q) * Da
                               : P.post_weight + static_cast<size_t>(q - Rres) * Da;
      const R alpha = (q < Rres) ? P.res_alpha[0] : P.post_alpha[0];
      for (int e = 0; e < Da; ++e) gxa[e] += alpha * dz[q] * wq[e];
    }
    const R ra = RmsForward(Da, cache->xa.data() + tok * Da, xan.data());
    RmsBackward(Da, xan.data(), ra, gxa.data(), dxa.data());
    // Dense read and read map: u = sum_i hpre_i X_i, hpre = sigmoid(alpha rms(x).Wp^T + b).
    R* dzp = cache->dz_proj.data() + tok * 2 * N + N;
    for (int e = 0; e < D; ++e) dflat[e] = 0, gy[e] = 0, gln[e] = 0;
    for (int i = 0; i < N; ++i) {
      const R dh = Dot(C, du + tok * C, x + i * C);
      dzp[i] = dh * hpre[i] * (R(1) - hpre[i]);
      for (int c = 0; c < C; ++c) dflat[i * C + c] += hpre[i] * du[tok * C + c];
      if (d.flash) win->dz_pre[(tok * w + d.pos) * N + i] = dzp[i];
    }
    // The read maps were projected from x (xhc) or from X0 at the window entry (flash: all w
    // of them, whose dz the later sublayers left in the window; nothing to do before it).
    const int maps = d.flash ? (d.pos == 0 ? w : 0) : 1;
    for (int q = 0; q < maps; ++q) {
      const R* wp0 = d.flash ? P.window_pre_weight[q] : P.pre_weight;
      const R alpha = d.flash ? P.window_pre_alpha[q][0] : P.pre_alpha[0];
      const R* dzq = d.flash ? win->dz_pre.data() + (tok * w + q) * N : dzp;
      for (int i = 0; i < N; ++i) {
        const R* wp = wp0 + static_cast<size_t>(i) * D;
        for (int e = 0; e < D; ++e) gy[e] += alpha * dzq[i] * wp[e];
      }
    }
    if (maps > 0) {
      const R r = RmsForward(D, x, y.data());
      RmsBackward(D, y.data(), r, gy.data(), dflat.data());
    }
    if (d.flash && d.has_router) {  // window entry: router dz from the window's dp
      R* dzr = cache->dz_proj.data() + tok * 2 * N;
      for (int i = 0; i < N; ++i) dzr[i] = 0;
      for (int j = d.m; j < k; ++j) {
        const R sv = cache->s[tok * N + idx[j]];
        dzr[idx[j]] += win->dp[tok * k + j] * sv * (R(1) - sv);
      }
      for (int i = 0; i < N; ++i) win->dz_router[tok * N + i] = dzr[i];
    }
    if (d.has_router) {  // s = sigmoid(ln(x).Wr^T + b); dz stashed by XhcBackwardOut
      const R* dzr = cache->dz_proj.data() + tok * 2 * N;
      for (int i = 0; i < N; ++i) {
        const R* wr = P.router_weight + static_cast<size_t>(i) * D;
        for (int e = 0; e < D; ++e) gln[e] += dzr[i] * wr[e];
      }
      R mean = 0, var = 0, mg = 0, mgl = 0;
      for (int e = 0; e < D; ++e) mean += x[e];
      mean /= D;
      for (int e = 0; e < D; ++e) var += (x[e] - mean) * (x[e] - mean);
      const R rstd_ln = R(1) / std::sqrt(var / D + R(kNormEps));
      for (int e = 0; e < D; ++e) ln[e] = (x[e] - mean) * rstd_ln, mg += gln[e];
      for (int e = 0; e < D; ++e) mgl += gln[e] * ln[e];
      mg /= D, mgl /= D;
      for (int e = 0; e < D; ++e) dflat[e] += rstd_ln * (gln[e] - mg - ln[e] * mgl);
    }
    // Streams outside the active set passed through; active ones were overwritten.
    std::vector<bool> active(N, false);
    for (int j = 0; j < k; ++j) active[idx[j]] = true;
    for (int i = 0; i < N; ++i) {
      if (!active[i])
        for (int c = 0; c < C; ++c) dflat[i * C + c] += dX[tok * D + i * C + c];
    }
    for (int j = 0; j < k; ++j)
      for (int c = 0; c < C; ++c) dflat[idx[j] * C + c] += dxa[j * C + c];
    for (int e = 0; e < D; ++e) dX[tok * D + e] = dflat[e];
  }
  if (d.flash && d.pos == 0) win->entry_backward_done = 1;
  (void)K;
  return absl::OkStatus();
}

template <typename R>
absl::Status XhcBackwardWeights(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* X_in,
                                const XhcCacheT<R>& cache, const XhcGradsT<R>& G) {
  if (!X_in) return absl::InvalidArgumentError("null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache.dims.C));
  RETURN_IF_ERROR(CheckCache(d, cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  RETURN_IF_ERROR(CheckGrads(d, G));
  if (cfg.type == ResidualType::kHc) return HcBackwardWeights(d, P, X_in, cache, G);
  RETURN_IF_ERROR(CheckWindowBackwardDone(d, cache));
  const FlashWindowT<R>* win = cache.window.get();
  const int N = d.N, K = d.K, C = d.C, D = d.D(), Da = d.Da(), Q = d.Q();
  const int T_len = cache.T_len;
  const size_t n = static_cast<size_t>(cache.B) * T_len;
  std::vector<R> y(D), ln(D), xan(Da);
  for (size_t tok = 0; tok < n; ++tok) {
    const R* x = X_in + tok * D;
    // X_in is the sublayer's input (xhc) or the window's entry state (flash), which is what
    // the read maps and the router were projected from.
    const R* dzr = cache.dz_proj.data() + tok * 2 * N;
    const R* dzp = d.flash ? win->dz_pre.data() + (tok * d.window + d.pos) * N : dzr + N;
    RmsForward(D, x, y.data());
    for (int i = 0; i < N; ++i) {
      const R* wp = P.pre_weight + static_cast<size_t>(i) * D;
      for (int e = 0; e < D; ++e)
        G.pre_weight[static_cast<size_t>(i) * D + e] += dzp[i] * P.pre_alpha[0] * y[e];
      G.pre_bias[i] += dzp[i];
      G.pre_alpha[0] += dzp[i] * Dot(D, y.data(), wp);
    }
    if (d.has_router) {
      R mean = 0, var = 0;
      for (int e = 0; e < D; ++e) mean += x[e];
      mean /= D;
      for (int e = 0; e < D; ++e) var += (x[e] - mean) * (x[e] - mean);
      const R rstd_ln = R(1) / std::sqrt(var / D + R(kNormEps));
      for (int e = 0; e < D; ++e) ln[e] = (x[e] - mean) * rstd_ln;
      for (int i = 0; i < N; ++i) {
        for (int e = 0; e < D; ++e)
          G.router_weight[static_cast<size_t>(i) * D + e] += dzr[i] * ln[e];
        G.router_bias[i] += dzr[i];
      }
    }
    RmsForward(Da, cache.xa.data() + tok * Da, xan.data());
    const R* dz = cache.dz_map.data() + tok * Q;
    for (int q = 0; q < Q; ++q) {
      const bool res = q < d.Rres();
      const int row = res ? q : q - d.Rres();
      const R* w = (res ? P.res_weight : P.post_weight) + static_cast<size_t>(row) * Da;
      R* gw = (res ? G.res_weight : G.post_weight) + static_cast<size_t>(row) * Da;
      const R alpha = res ? P.res_alpha[0] : P.post_alpha[0];
      for (int e = 0; e < Da; ++e) gw[e] += dz[q] * alpha * xan[e];
      (res ? G.res_bias : G.post_bias)[row] += dz[q];
      (res ? G.res_alpha : G.post_alpha)[0] += dz[q] * Dot(Da, xan.data(), w);
    }
  }
  for (size_t tok = 0; tok < n; ++tok) {  // conv.j.weight[tau][c] += dg_j[t][c] out[t-tau][c]
    const int t = static_cast<int>(tok % T_len);
    for (int j = 0; j < d.r; ++j) {
      for (int tau = 0; tau < d.kernels[j] && tau <= t; ++tau) {
        const R* outp = cache.aug.data() + (tok - tau) * K * C;
        const R* dgj = cache.dg.data() + (tok * d.r + j) * C;
        for (int c = 0; c < C; ++c) G.conv_weight[j][tau * C + c] += dgj[c] * outp[c];
      }
    }
  }
  return absl::OkStatus();
}

#define XHC_INSTANTIATE_REF_BACKWARD(R)                                                         \
  template absl::Status XhcBackwardOut<R>(const XhcConfig&, const XhcParamsT<R>&, const R*,     \
                                          XhcCacheT<R>*, R*);                                   \
  template absl::Status XhcBackwardInput<R>(const XhcConfig&, const XhcParamsT<R>&, const R*,   \
                                            const R*, R*, XhcCacheT<R>*);                       \
  template absl::Status XhcBackwardWeights<R>(const XhcConfig&, const XhcParamsT<R>&, const R*, \
                                              const XhcCacheT<R>&, const XhcGradsT<R>&);
XHC_INSTANTIATE_REF_BACKWARD(float)
XHC_INSTANTIATE_REF_BACKWARD(double)

}  // namespace xhc::kernels::ref
