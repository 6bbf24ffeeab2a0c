// Reference hc sublayer (model-spec.md 4.4). Per token, x~_i = rms(X[i]) over C:
//   Hpre[i]    = pre.alpha  * tanh(<pre.weight[0],  x~_i>) + pre.bias[i]
//   Hpost[a]   = post.alpha * tanh(<post.weight[0], x~_a>) + post.bias[a]
//   Hres[a][i] = res.alpha  * tanh(<res.weight[a],  x~_i>) + res.bias[a*N + i]
//   u = sum_i Hpre[i] X[i];   X'[a] = sum_i Hres[a][i] X[i] + Hpost[a] * out
// The dots are kept per token as (N, N+2): column 0 pre, 1 post, 2 + a res row a.

#include "kernels/cpu/xhc/hc_reference.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/xhc/xhc_reference.h"

namespace xhc::kernels::ref {
namespace {

// Row `col` of the stacked map weights [pre; post; res] (each of length C).
template <typename R>
const R* MapRow(const XhcParamsT<R>& P, int C, int col) {
  if (col == 0) return P.pre_weight;
  if (col == 1) return P.post_weight;
  return P.res_weight + static_cast<size_t>(col - 2) * C;
}

template <typename R>
R MapAlpha(const XhcParamsT<R>& P, int col) {
  return col == 0 ? P.pre_alpha[0] : col == 1 ? P.post_alpha[0] : P.res_alpha[0];
}

}  // namespace

template <typename R>
absl::Status HcPre(const XhcDims& d, const XhcParamsT<R>& P, int B, int T_len, const R* X, R* u,
                   XhcCacheT<R>* cache) {
  const int N = d.N, C = d.C, D = d.D(), W = N + 2;
  const size_t n = static_cast<size_t>(B) * T_len;
  cache->hc_rstd.resize(n * N);
  cache->hc_dots.resize(n * N * W);
  cache->hc_dmap.resize(n * N * W);
  std::vector<R> xt(C);
  for (size_t tok = 0; tok < n; ++tok) {
    const R* x = X + tok * D;  // X[tok] is (N, C)
    R* dots = cache->hc_dots.data() + tok * N * W;
    R* hpre = cache->hpre.data() + tok * N;
    R* hpost = cache->hpost.data() + tok * N;
    R* hres = cache->hres.data() + tok * N * N;
    for (int i = 0; i < N; ++i) {
      cache->hc_rstd[tok * N + i] = RmsForward(C, x + i * C, xt.data());
      for (int col = 0; col < W; ++col) dots[i * W + col] = Dot(C, MapRow(P, C, col), xt.data());
    }
    for (int i = 0; i < N; ++i) {
      hpre[i] = P.pre_alpha[0] * std::tanh(dots[i * W + 0]) + P.pre_bias[i];
      hpost[i] = P.post_alpha[0] * std::tanh(dots[i * W + 1]) + P.post_bias[i];
      for (int a = 0; a < N; ++a) {
        hres[a * N + i] = P.res_alpha[0] * std::tanh(dots[i * W + 2 + a]) + P.res_bias[a * N + i];
      }
    }
    for (int c = 0; c < C; ++c) {
      R acc = 0;
      for (int i = 0; i < N; ++i) acc += hpre[i] * x[i * C + c];
      u[tok * C + c] = acc;
    }
    for (int e = 0; e < D; ++e) cache->xa[tok * D + e] = x[e];
    for (int i = 0; i < N; ++i) cache->idx[tok * N + i] = i, cache->p[tok * N + i] = 1;
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status HcPost(const XhcDims& d, const R* out, R* X, XhcCacheT<R>* cache) {
  const int N = d.N, C = d.C, D = d.D();
  const size_t n = static_cast<size_t>(cache->B) * cache->T_len;
  for (size_t tok = 0; tok < n; ++tok) {
    const R* xa = cache->xa.data() + tok * D;  // old state
    const R* hres = cache->hres.data() + tok * N * N;
    const R* hpost = cache->hpost.data() + tok * N;
    for (int c = 0; c < C; ++c) cache->aug[tok * C + c] = out[tok * C + c];
    for (int a = 0; a < N; ++a) {
      for (int c = 0; c < C; ++c) {
        R acc = 0;
        for (int i = 0; i < N; ++i) acc += hres[a * N + i] * xa[i * C + c];
        X[tok * D + a * C + c] = acc + hpost[a] * out[tok * C + c];
      }
    }
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status HcBackwardOut(const XhcDims& d, const R* dX_new, XhcCacheT<R>* cache, R* d_out) {
  const int N = d.N, C = d.C, D = d.D(), W = N + 2;
  const size_t n = static_cast<size_t>(cache->B) * cache->T_len;
  for (size_t tok = 0; tok < n; ++tok) {
    const R* g = dX_new + tok * D;
    const R* xa = cache->xa.data() + tok * D;
    const R* out = cache->aug.data() + tok * C;
    const R* hpost = cache->hpost.data() + tok * N;
    R* dmap = cache->hc_dmap.data() + tok * N * W;
    for (int c = 0; c < C; ++c) {
      R acc = 0;
      for (int a = 0; a < N; ++a) acc += hpost[a] * g[a * C + c];
      d_out[tok * C + c] = acc;
    }
    for (int a = 0; a < N; ++a) {
      dmap[a * W + 1] = Dot(C, g + a * C, out);  // d Hpost[a]
      for (int i = 0; i < N; ++i)
        dmap[i * W + 2 + a] = Dot(C, g + a * C, xa + i * C);  // d Hres[a][i]
    }
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status HcBackwardInput(const XhcDims& d, const XhcParamsT<R>& P, const R* X_in, const R* du,
                             R* dX, XhcCacheT<R>* cache) {
  const int N = d.N, C = d.C, D = d.D(), W = N + 2;
  const size_t n = static_cast<size_t>(cache->B) * cache->T_len;
  std::vector<R> dx(D), xt(C), gt(C);
  for (size_t tok = 0; tok < n; ++tok) {
    const R* x = X_in + tok * D;
    R* g = dX + tok * D;  // in: d loss / d X' ; out: d loss / d X
    const R* hpre = cache->hpre.data() + tok * N;
    const R* hres = cache->hres.data() + tok * N * N;
    const R* dots = cache->hc_dots.data() + tok * N * W;
    R* dmap = cache->hc_dmap.data() + tok * N * W;
    for (int i = 0; i < N; ++i) dmap[i * W + 0] = Dot(C, du + tok * C, x + i * C);  // d Hpre[i]
    for (int i = 0; i < N; ++i) {
      for (int c = 0; c < C; ++c) {
        R acc = hpre[i] * du[tok * C + c];
        for (int a = 0; a < N; ++a) acc += hres[a * N + i] * g[a * C + c];
        dx[i * C + c] = acc;
      }
      // The three maps read x~_i through tanh: d dot = d H * alpha * (1 - tanh^2).
      for (int c = 0; c < C; ++c) gt[c] = 0;
      for (int col = 0; col < W; ++col) {
        const R t = std::tanh(dots[i * W + col]);
        const R dz = dmap[i * W + col] * MapAlpha(P, col) * (R(1) - t * t);
        const R* w = MapRow(P, C, col);
        for (int c = 0; c < C; ++c) gt[c] += dz * w[c];
      }
      const R r = RmsForward(C, x + i * C, xt.data());
      RmsBackward(C, xt.data(), r, gt.data(), dx.data() + i * C);
    }
    for (int e = 0; e < D; ++e) g[e] = dx[e];
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status HcBackwardWeights(const XhcDims& d, const XhcParamsT<R>& P, const R* X_in,
                               const XhcCacheT<R>& cache, const XhcGradsT<R>& G) {
  const int N = d.N, C = d.C, D = d.D(), W = N + 2;
  const size_t n = static_cast<size_t>(cache.B) * cache.T_len;
  std::vector<R> xt(C);
  for (size_t tok = 0; tok < n; ++tok) {
    const R* x = X_in + tok * D;
    const R* dots = cache.hc_dots.data() + tok * N * W;
    const R* dmap = cache.hc_dmap.data() + tok * N * W;
    for (int i = 0; i < N; ++i) {
      RmsForward(C, x + i * C, xt.data());
      for (int col = 0; col < W; ++col) {
        const R dh = dmap[i * W + col];
        const R t = std::tanh(dots[i * W + col]);
        const R dz = dh * MapAlpha(P, col) * (R(1) - t * t);
        R* gw = col == 0   ? G.pre_weight
                : col == 1 ? G.post_weight
                           : G.res_weight + static_cast<size_t>(col - 2) * C;
        for (int c = 0; c < C; ++c) gw[c] += dz * xt[c];
        if (col == 0) {
          G.pre_bias[i] += dh, G.pre_alpha[0] += dh * t;
        } else if (col == 1) {
          G.post_bias[i] += dh, G.post_alpha[0] += dh * t;
        } else {
          G.res_bias[(col - 2) * N + i] += dh, G.res_alpha[0] += dh * t;
        }
      }
    }
  }
  return absl::OkStatus();
}

#define XHC_INSTANTIATE_HC_REF(R)                                                              \
  template absl::Status HcPre<R>(const XhcDims&, const XhcParamsT<R>&, int, int, const R*, R*, \
                                 XhcCacheT<R>*);                                               \
  template absl::Status HcPost<R>(const XhcDims&, const R*, R*, XhcCacheT<R>*);                \
  template absl::Status HcBackwardOut<R>(const XhcDims&, const R*, XhcCacheT<R>*, R*);         \
  template absl::Status HcBackwardInput<R>(const XhcDims&, const XhcParamsT<R>&, const R*,     \
                                           const R*, R*, XhcCacheT<R>*);                       \
  template absl::Status HcBackwardWeights<R>(const XhcDims&, const XhcParamsT<R>&, const R*,   \
                                             const XhcCacheT<R>&, const XhcGradsT<R>&);
XHC_INSTANTIATE_HC_REF(float)
XHC_INSTANTIATE_HC_REF(double)

}  // namespace xhc::kernels::ref
