// Reference expand (spec 2.2) and head reduce (spec 2.4).

#include <vector>

#include "kernels/cpu/xhc/xhc_reference.h"

namespace xhc::kernels::ref {

template <typename R>
void ExpandForward(int n, int N, int C, const R* e, R* X) {
  for (int tok = 0; tok < n; ++tok)  // e is (n, C), X is (n, N, C)
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < C; ++c) X[(static_cast<size_t>(tok) * N + i) * C + c] = e[tok * C + c];
}

template <typename R>
void ExpandBackward(int n, int N, int C, const R* dX, R* de) {
  for (int tok = 0; tok < n; ++tok)
    for (int c = 0; c < C; ++c) {
      R acc = 0;
      for (int i = 0; i < N; ++i) acc += dX[(static_cast<size_t>(tok) * N + i) * C + c];
      de[tok * C + c] = acc;
    }
}

template <typename R>
absl::Status HeadReduceForward(const HeadParamsT<R>& P, int n, int N, int C, const R* X, R* y,
                               HeadCacheT<R>* cache) {
  if (n <= 0 || N <= 0 || C <= 0 || !X || !y || !cache || !P.weight || !P.bias || !P.alpha) {
    return absl::InvalidArgumentError("HeadReduceForward: bad shape or null buffer");
  }
  const int D = N * C;
  cache->rstd.resize(n);
  cache->proj.resize(static_cast<size_t>(n) * N);
  cache->h.resize(static_cast<size_t>(n) * N);
  cache->dz.resize(static_cast<size_t>(n) * N);
  std::vector<R> yn(D);
  for (int tok = 0; tok < n; ++tok) {
    const R* x = X + static_cast<size_t>(tok) * D;  // x is (N*C)
    cache->rstd[tok] = RmsForward(D, x, yn.data());
    for (int i = 0; i < N; ++i) {
      const R* w = P.weight + static_cast<size_t>(i) * D;
      cache->proj[tok * N + i] = Dot(D, x, w);
      cache->h[tok * N + i] = Sigmoid(P.alpha[0] * Dot(D, yn.data(), w) + P.bias[i]);
    }
    for (int c = 0; c < C; ++c) {
      R acc = 0;
      for (int i = 0; i < N; ++i) acc += cache->h[tok * N + i] * x[i * C + c];
      y[tok * C + c] = acc;
    }
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status HeadReduceBackwardInput(const HeadParamsT<R>& P, int n, int N, int C, const R* X,
                                     const R* dy, HeadCacheT<R>* cache, R* dX) {
  if (!cache || cache->h.size() != static_cast<size_t>(n) * N || !X || !dy || !dX) {
    return absl::InvalidArgumentError("HeadReduceBackwardInput: cache / shape mismatch");
  }
  const int D = N * C;
  std::vector<R> yn(D), gy(D);
  for (int tok = 0; tok < n; ++tok) {
    const R* x = X + static_cast<size_t>(tok) * D;
    R* dx = dX + static_cast<size_t>(tok) * D;
    for (int e = 0; e < D; ++e) dx[e] = 0, gy[e] = 0;
    for (int i = 0; i < N; ++i) {
      const R h = cache->h[tok * N + i];
      const R dz = Dot(C, dy + static_cast<size_t>(tok) * C, x + i * C) * h * (R(1) - h);
      cache->dz[tok * N + i] = dz;
      for (int c = 0; c < C; ++c) dx[i * C + c] += h * dy[tok * C + c];
      const R* w = P.weight + static_cast<size_t>(i) * D;
      for (int e = 0; e < D; ++e) gy[e] += P.alpha[0] * dz * w[e];
    }
    const R r = RmsForward(D, x, yn.data());
    RmsBackward(D, yn.data(), r, gy.data(), dx);
  }
  return absl::OkStatus();
}

template <typename R>
absl::Status HeadReduceBackwardWeights(const HeadParamsT<R>& P, int n, int N, int C, const R* X,
                                       const HeadCacheT<R>& cache, const HeadGradsT<R>& G) {
  if (cache.dz.size() != static_cast<size_t>(n) * N || !G.weight || !G.bias || !G.alpha) {
    return absl::InvalidArgumentError("HeadReduceBackwardWeights: cache / grads mismatch");
  }
  const int D = N * C;
  std::vector<R> yn(D);
  for (int tok = 0; tok < n; ++tok) {
    RmsForward(D, X + static_cast<size_t>(tok) * D, yn.data());
    for (int i = 0; i < N; ++i) {
      const R dz = cache.dz[tok * N + i];
      for (int e = 0; e < D; ++e)
        G.weight[static_cast<size_t>(i) * D + e] += dz * P.alpha[0] * yn[e];
      G.bias[i] += dz;
      G.alpha[0] += dz * Dot(D, yn.data(), P.weight + static_cast<size_t>(i) * D);
    }
  }
  return absl::OkStatus();
}

#define XHC_INSTANTIATE_REF_HEAD(R)                                                                \
  template void ExpandForward<R>(int, int, int, const R*, R*);                                     \
  template void ExpandBackward<R>(int, int, int, const R*, R*);                                    \
  template absl::Status HeadReduceForward<R>(const HeadParamsT<R>&, int, int, int, const R*, R*,   \
                                             HeadCacheT<R>*);                                      \
  template absl::Status HeadReduceBackwardInput<R>(const HeadParamsT<R>&, int, int, int, const R*, \
                                                   const R*, HeadCacheT<R>*, R*);                  \
  template absl::Status HeadReduceBackwardWeights<R>(                                              \
      const HeadParamsT<R>&, int, int, int, const R*, const HeadCacheT<R>&, const HeadGradsT<R>&);
XHC_INSTANTIATE_REF_HEAD(float)
XHC_INSTANTIATE_REF_HEAD(double)

}  // namespace xhc::kernels::ref
