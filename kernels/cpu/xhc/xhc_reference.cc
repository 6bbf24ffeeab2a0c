#include "kernels/cpu/xhc/xhc_reference.h"

#include <vector>

#include "kernels/cpu/xhc/flash_window.h"
#include "kernels/cpu/xhc/hc_reference.h"

namespace xhc::kernels::ref {
namespace {

template <typename R>
R Mean(int n, const R* x) {
  R mean = 0;
  for (int c = 0; c < n; ++c) mean += x[c];
  return mean / n;
}

// 1 / sqrt(population variance + eps): the LayerNorm factor of x, whose mean is `mean`.
template <typename R>
R RstdLn(int n, const R* x, R mean) {
  R var = 0;
  for (int c = 0; c < n; ++c) var += (x[c] - mean) * (x[c] - mean);
  return R(1) / std::sqrt(var / n + R(kNormEps));
}

// Router and read map of one token: flat is (N*C). Fills s, hpre, proj, stats in the cache.
template <typename R>
void RefTokenMaps(const XhcDims& d, const XhcParamsT<R>& P, const R* flat, size_t tok,
                  XhcCacheT<R>* cache) {
  const int N = d.N, D = d.D();
  const R mean = Mean(D, flat);
  const R rstd_ln = RstdLn(D, flat, mean);
  std::vector<R> ln(D), y(D);  // ln is (N*C), y = rms(flat) is (N*C)
  for (int c = 0; c < D; ++c) ln[c] = (flat[c] - mean) * rstd_ln;
  const R rstd = RmsForward(D, flat, y.data());
  cache->mean[tok] = mean;
  cache->rstd_ln[tok] = rstd_ln;
  cache->rstd[tok] = rstd;
  for (int i = 0; i < N; ++i) {
    if (d.has_router) {
      const R* w = P.router_weight + static_cast<size_t>(i) * D;  // router.weight is [N, N*C]
      cache->proj[tok * 2 * N + i] = Dot(D, flat, w);
      cache->s[tok * N + i] = Sigmoid(Dot(D, ln.data(), w) + P.router_bias[i]);
    } else {
      cache->proj[tok * 2 * N + i] = 0;
      cache->s[tok * N + i] = 0;
    }
    const R* w = P.pre_weight + static_cast<size_t>(i) * D;  // pre.weight is [N, N*C]
    cache->proj[tok * 2 * N + N + i] = Dot(D, flat, w);
    cache->hpre[tok * N + i] = Sigmoid(P.pre_alpha[0] * Dot(D, y.data(), w) + P.pre_bias[i]);
  }
}

// xhc_flash window entry (spec 4.5 steps 1-2) for one token: statistics of flat = X0[tok],
// the router, and the read maps of all w sublayers of the window, into the window context.
template <typename R>
void RefFlashEntryMaps(const XhcDims& d, const XhcParamsT<R>& P, const R* flat, size_t tok,
                       FlashWindowT<R>* win) {
  const int N = d.N, D = d.D(), w = d.window, PW = N + w * N;
  const R mean = Mean(D, flat);
  const R rstd_ln = RstdLn(D, flat, mean);
  std::vector<R> ln(D), y(D);
  for (int c = 0; c < D; ++c) ln[c] = (flat[c] - mean) * rstd_ln;
  const R rstd = RmsForward(D, flat, y.data());
  win->mean[tok] = mean;
  win->rstd_ln[tok] = rstd_ln;
  win->rstd[tok] = rstd;
  R* proj = win->proj.data() + tok * PW;
  for (int i = 0; i < N; ++i) {
    const R* wr = P.router_weight + static_cast<size_t>(i) * D;
    proj[i] = Dot(D, flat, wr);
    win->s[tok * N + i] = Sigmoid(Dot(D, ln.data(), wr) + P.router_bias[i]);
  }
  for (int q = 0; q < w; ++q) {
    for (int i = 0; i < N; ++i) {
      const R* wp = P.window_pre_weight[q] + static_cast<size_t>(i) * D;
      proj[N + q * N + i] = Dot(D, flat, wp);
      win->hpre[(tok * w + q) * N + i] =
          Sigmoid(P.window_pre_alpha[q][0] * Dot(D, y.data(), wp) + P.window_pre_bias[q][i]);
    }
  }
  SelectActive(N, d.k, d.m, win->s.data() + tok * N, win->idx.data() + tok * d.k,
               win->p.data() + tok * d.k);
}

// Res and post maps of one token from its gathered active streams xa (k*C).
template <typename R>
void RefTokenMixMaps(const XhcConfig& cfg, const XhcDims& d, const XhcParamsT<R>& P, size_t tok,
                     XhcCacheT<R>* cache) {
  const int k = d.k, K = d.K, Da = d.Da(), Q = d.Q();
  const R* xa = cache->xa.data() + tok * Da;
  std::vector<R> xan(Da), z(k * k);
  cache->rstd_a[tok] = RmsForward(Da, xa, xan.data());
  const int Rres = d.Rres();  // 0 inside a flash window: no mixing there
  for (int q = 0; q < Rres; ++q) {
    const R* w = P.res_weight + static_cast<size_t>(q) * Da;  // res.weight is [k*k, k*C]
    cache->map_raw[tok * Q + q] = Dot(Da, xa, w);
    z[q] = P.res_alpha[0] * Dot(Da, xan.data(), w) + P.res_bias[q];
  }
  if (d.has_mix) SinkhornForward(k, cfg.sinkhorn_iters, z.data(), cache->hres.data() + tok * k * k);
  for (int q = 0; q < k * K; ++q) {
    const R* w = P.post_weight + static_cast<size_t>(q) * Da;  // post.weight is [k*K, k*C]
    cache->map_raw[tok * Q + Rres + q] = Dot(Da, xa, w);
    const R zp = P.post_alpha[0] * Dot(Da, xan.data(), w) + P.post_bias[q];
    cache->hpost[tok * k * K + q] = R(2) * Sigmoid(zp);
  }
}

}  // namespace

template <typename R>
absl::Status XhcPre(const XhcConfig& cfg, const XhcParamsT<R>& P, int B, int T_len, int C,
                    const R* X, R* u, XhcCacheT<R>* cache) {
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, C));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (B <= 0 || T_len <= 0 || !X || !u || !cache) {
    return absl::InvalidArgumentError("XhcPre: empty batch or null buffer");
  }
  ResizeCache(d, B, T_len, cache);
  if (cfg.type == ResidualType::kHc) return HcPre(d, P, B, T_len, X, u, cache);
  RETURN_IF_ERROR(CheckWindowParams(d, P));
  const int N = d.N, k = d.k, D = d.D();
  const size_t n = static_cast<size_t>(B) * T_len;
  RETURN_IF_ERROR(PrepareWindow(d, n, cache));
  for (size_t tok = 0; tok < n; ++tok) {
    const R* flat = X + tok * D;  // X[tok] is (N, C)
    int* idx = cache->idx.data() + tok * k;
    if (d.flash) {  // routing and read map decided once, at the window entry, from X0
      if (d.pos == 0) RefFlashEntryMaps(d, P, flat, tok, cache->window.get());
      CopyFromWindow(d, tok, cache);
    } else {
      RefTokenMaps(d, P, flat, tok, cache);
      R* p = cache->p.data() + tok * k;
      if (d.has_router) {
        SelectActive(N, k, d.m, cache->s.data() + tok * N, idx, p);
      } else {
        for (int j = 0; j < k; ++j) idx[j] = j, p[j] = 1;
      }
    }
    for (int c = 0; c < C; ++c) {  // u[tok] = sum_i hpre_i X[tok, i]
      R acc = 0;
      for (int i = 0; i < N; ++i) acc += cache->hpre[tok * N + i] * flat[i * C + c];
      u[tok * C + c] = acc;
    }
    for (int j = 0; j < k; ++j) {  // Xa[j] = X[tok, idx_j]
      for (int c = 0; c < C; ++c) cache->xa[(tok * k + j) * C + c] = flat[idx[j] * C + c];
    }
    RefTokenMixMaps(cfg, d, P, tok, cache);
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status XhcPost(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* out, R* X,
                     XhcCacheT<R>* cache) {
  if (!cache || !out || !X) return absl::InvalidArgumentError("XhcPost: null buffer");
  ASSIGN_OR_RETURN(XhcDims d, ResolveDims(cfg, cache->dims.C));
  RETURN_IF_ERROR(CheckCache(d, *cache));
  RETURN_IF_ERROR(CheckParams(d, P));
  if (cfg.type == ResidualType::kHc) return HcPost(d, out, X, cache);
  const int k = d.k, K = d.K, C = d.C, D = d.D(), T_len = cache->T_len;
  std::vector<R> g(d.r * C + 1);
  for (int b = 0; b < cache->B; ++b) {
    for (int t = 0; t < T_len; ++t) {
      const size_t tok = static_cast<size_t>(b) * T_len + t;
      R* v = cache->aug.data() + tok * K * C;  // aug[tok] is (K, C)
      for (int c = 0; c < C; ++c) v[c] = out[tok * C + c];
      RefConv(d, P, out + static_cast<size_t>(b) * T_len * C, t, g.data());
      RefGramSchmidt(d, cfg.gram_schmidt, g.data(), v, static_cast<R*>(nullptr));
      const R* hres = cache->hres.data() + tok * k * k;
      const R* hpost = cache->hpost.data() + tok * k * K;
      const R* xa = cache->xa.data() + tok * k * C;
      for (int j = 0; j < k; ++j) {
        const int i = cache->idx[tok * k + j];
        const R pj = cache->p[tok * k + j];
        for (int c = 0; c < C; ++c) {
          R acc = 0;
          if (!d.has_mix) acc = xa[j * C + c];  // inside a flash window: no mixing
          for (int jj = 0; jj < k && d.has_mix; ++jj) acc += hres[j * k + jj] * xa[jj * C + c];
          R wr = 0;
          for (int q = 0; q < K; ++q) wr += hpost[j * K + q] * v[q * C + c];
          X[tok * D + i * C + c] = acc + pj * wr;
        }
      }
    }
  }
  return absl::OkStatus();
}

template absl::Status XhcPre<float>(const XhcConfig&, const XhcParamsT<float>&, int, int, int,
                                    const float*, float*, XhcCacheT<float>*);
template absl::Status XhcPre<double>(const XhcConfig&, const XhcParamsT<double>&, int, int, int,
                                     const double*, double*, XhcCacheT<double>*);
template absl::Status XhcPost<float>(const XhcConfig&, const XhcParamsT<float>&, const float*,
                                     float*, XhcCacheT<float>*);
template absl::Status XhcPost<double>(const XhcConfig&, const XhcParamsT<double>&, const double*,
                                      double*, XhcCacheT<double>*);

}  // namespace xhc::kernels::ref
