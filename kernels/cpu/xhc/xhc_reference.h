#ifndef XHC_KERNELS_CPU_XHC_XHC_REFERENCE_H_
#define XHC_KERNELS_CPU_XHC_XHC_REFERENCE_H_

// Naive reference of the xHC / mHC residual sublayer (model-spec.md section 4): plain loops,
// one token at a time, the normalised state materialised, every formula written as in the
// spec. Templated on the scalar so tests can run it in double against finite differences.
// Same entry points and cache contract as the optimized path (xhc_ops.h), which see.

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/xhc/sinkhorn.h"
#include "kernels/cpu/xhc/state_restore.h"
#include "kernels/cpu/xhc/xhc_check.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels::ref {

template <typename R>
R Dot(int n, const R* a, const R* b) {
  R acc = 0;
  for (int i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

// x is (n); y = rms(x) = x * r with r = 1 / sqrt(mean(x^2) + eps). Returns r.
template <typename R>
R RmsForward(int n, const R* x, R* y) {
  R ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const R r = R(1) / std::sqrt(ss / n + R(kNormEps));
  for (int i = 0; i < n; ++i) y[i] = x[i] * r;
  return r;
}

// dx += d rms(x) applied to gy, with y = rms(x) and its factor r: r * (gy - y * mean(gy*y)).
template <typename R>
void RmsBackward(int n, const R* y, R r, const R* gy, R* dx) {
  const R m = Dot(n, gy, y) / n;
  for (int i = 0; i < n; ++i) dx[i] += r * (gy[i] - y[i] * m);
}

// The per-token temporal augmentation: g_j[t] = sum_tau w_j[tau] * out[t - tau] inside one
// sequence. out_seq is (T, C) for the token's sequence; g is (r, C).
template <typename R>
void RefConv(const XhcDims& d, const XhcParamsT<R>& P, const R* out_seq, int t, R* g) {
  const int C = d.C;
  for (int j = 0; j < d.r; ++j) {
    for (int c = 0; c < C; ++c) {
      R acc = 0;
      for (int tau = 0; tau < d.kernels[j] && tau <= t; ++tau) {
        acc += P.conv_weight[j][tau * C + c] * out_seq[(t - tau) * C + c];
      }
      g[j * C + c] = acc;
    }
  }
}

// Modified Gram-Schmidt: v is (K, C) with v[0] = out on entry and g (r, C) the conv outputs.
// hist, when given, is (r, r, C): hist[j-1][i] = g before subtracting its v_i component.
template <typename R>
void RefGramSchmidt(const XhcDims& d, bool orthogonalise, const R* g, R* v, R* hist) {
  const int C = d.C;
  for (int j = 1; j <= d.r; ++j) {
    R* vj = v + j * C;
    for (int c = 0; c < C; ++c) vj[c] = g[(j - 1) * C + c];
    if (!orthogonalise) continue;
    for (int i = 0; i < j; ++i) {
      const R* vi = v + i * C;
      if (hist)
        for (int c = 0; c < C; ++c) hist[((j - 1) * d.r + i) * C + c] = vj[c];
      const R coef = Dot(C, vj, vi) / (Dot(C, vi, vi) + R(kGramSchmidtEps));
      for (int c = 0; c < C; ++c) vj[c] -= coef * vi[c];
    }
  }
}

// Forward, first half: maps, selection, dense read. X is (B,T,N,C), u is (B,T,C).
template <typename R>
absl::Status XhcPre(const XhcConfig& cfg, const XhcParamsT<R>& P, int B, int T_len, int C,
                    const R* X, R* u, XhcCacheT<R>* cache);
// Forward, second half: temporal augmentation, mix, write, scatter IN PLACE on X.
template <typename R>
absl::Status XhcPost(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* out, R* X,
                     XhcCacheT<R>* cache);
// Input gradient, first half: d_out (B,T,C) from dX_new (B,T,N,C).
template <typename R>
absl::Status XhcBackwardOut(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* dX_new,
                            XhcCacheT<R>* cache, R* d_out);
// Input gradient, second half: dX (in: dX_new, out: d loss / d X_in), given du (B,T,C).
template <typename R>
absl::Status XhcBackwardInput(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* X_in,
                              const R* du, R* dX, XhcCacheT<R>* cache);
// I.2 on the state after the sublayer, restored to its input first (xhc_ops.h's contract for
// the optimized XhcBackwardInputRestoring, which fuses the restore into the pass). Not for
// xhc_flash, whose sublayers take the window's entry state.
template <typename R>
absl::Status XhcBackwardInputRestoring(const XhcConfig& cfg, const XhcParamsT<R>& P, R* X,
                                       const R* du, R* dX, XhcCacheT<R>* cache) {
  if (cfg.type == ResidualType::kXhcFlash) {
    return absl::InvalidArgumentError(
        "XhcBackwardInputRestoring: an xhc_flash sublayer takes its window's entry state (restore "
        "it with the entry's cache, then XhcBackwardInput)");
  }
  RestoreInput(*cache, X);
  return XhcBackwardInput<R>(cfg, P, X, du, dX, cache);
}

// Weight gradients, accumulated into `grads`.
template <typename R>
absl::Status XhcBackwardWeights(const XhcConfig& cfg, const XhcParamsT<R>& P, const R* X_in,
                                const XhcCacheT<R>& cache, const XhcGradsT<R>& grads);

// Expand (spec 2.2): X[n, i] = e[n] for all streams; backward de[n] = sum_i dX[n, i].
template <typename R>
void ExpandForward(int n, int N, int C, const R* e, R* X);
template <typename R>
void ExpandBackward(int n, int N, int C, const R* dX, R* de);

// Head reduce (spec 2.4). y is (n, C). Backward input writes dX (n, N, C) and stashes dz in
// the cache; backward weights accumulates into grads.
template <typename R>
absl::Status HeadReduceForward(const HeadParamsT<R>& P, int n, int N, int C, const R* X, R* y,
                               HeadCacheT<R>* cache);
template <typename R>
absl::Status HeadReduceBackwardInput(const HeadParamsT<R>& P, int n, int N, int C, const R* X,
                                     const R* dy, HeadCacheT<R>* cache, R* dX);
template <typename R>
absl::Status HeadReduceBackwardWeights(const HeadParamsT<R>& P, int n, int N, int C, const R* X,
                                       const HeadCacheT<R>& cache, const HeadGradsT<R>& grads);

}  // namespace xhc::kernels::ref

#endif  // XHC_KERNELS_CPU_XHC_XHC_REFERENCE_H_
