#ifndef XHC_KERNELS_CPU_XHC_SINKHORN_H_
#define XHC_KERNELS_CPU_XHC_SINKHORN_H_

// Per-token small-matrix pieces shared by the reference and the optimized path: they touch
// O(k^2) numbers per token, so one plain implementation serves both (and the double
// instantiation is checked against finite differences).

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels {

// H = sinkhorn(Z) for a k x k row-major matrix (spec 4.2): exp(Z - max Z), then `iters`
// times: columns divided by (sum + eps), then rows divided by (sum + eps).
template <typename T>
void SinkhornForward(int k, int iters, const T* z, T* h) {
  const int kk = k * k;
  T zmax = z[0];
  for (int q = 1; q < kk; ++q) zmax = std::max(zmax, z[q]);
  for (int q = 0; q < kk; ++q) h[q] = std::exp(z[q] - zmax);
  for (int it = 0; it < iters; ++it) {
    for (int c = 0; c < k; ++c) {
      T sum = 0;
      for (int r = 0; r < k; ++r) sum += h[r * k + c];
      const T inv = T(1) / (sum + T(kSinkhornEps));
      for (int r = 0; r < k; ++r) h[r * k + c] *= inv;
    }
    for (int r = 0; r < k; ++r) {
      T sum = 0;
      for (int c = 0; c < k; ++c) sum += h[r * k + c];
      const T inv = T(1) / (sum + T(kSinkhornEps));
      for (int c = 0; c < k; ++c) h[r * k + c] *= inv;
    }
  }
}

// dz += d sinkhorn(z) / dz applied to dh. Recomputes the 2*iters normalisation steps (the
// spec asks for recomputation instead of storing them); `work` is resized as needed.
// A step y = x / (sum(x) + eps) over a group has dx_a = (dy_a - sum_b dy_b y_b) / (sum + eps).
template <typename T>
void SinkhornBackward(int k, int iters, const T* z, const T* dh, T* dz, std::vector<T>& work) {
  const int kk = k * k;
  const int steps = 2 * iters;
  work.resize(static_cast<size_t>(kk) * (steps + 2));
  T* mats = work.data();  // mats[s] = matrix before step s; mats[steps] = output
  int amax = 0;
  for (int q = 1; q < kk; ++q)
    if (z[q] > z[amax]) amax = q;
  for (int q = 0; q < kk; ++q) mats[q] = std::exp(z[q] - z[amax]);
  for (int s = 0; s < steps; ++s) {
    const T* x = mats + s * kk;
    T* y = mats + (s + 1) * kk;
    const bool cols = (s % 2 == 0);
    for (int g = 0; g < k; ++g) {
      T sum = 0;
      for (int e = 0; e < k; ++e) sum += cols ? x[e * k + g] : x[g * k + e];
      const T inv = T(1) / (sum + T(kSinkhornEps));
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        y[q] = x[q] * inv;
      }
    }
  }
  T* grad = mats + (steps + 1) * kk;
  for (int q = 0; q < kk; ++q) grad[q] = dh[q];
  for (int s = steps - 1; s >= 0; --s) {
    const T* x = mats + s * kk;
    const T* y = mats + (s + 1) * kk;
    const bool cols = (s % 2 == 0);
    for (int g = 0; g < k; ++g) {
      T sum = 0, dot = 0;
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        sum += x[q];
        dot += grad[q] * y[q];
      }
      const T inv = T(1) / (sum + T(kSinkhornEps));
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        grad[q] = (grad[q] - dot) * inv;
      }
    }
  }
  // M0 = exp(z - z[amax]); the max is a function of z too (exact gradient of the steps).
  T total = 0;
  for (int q = 0; q < kk; ++q) {
    const T g = grad[q] * mats[q];
    dz[q] += g;
    total += g;
  }
  dz[amax] -= total;
}

// Active set of spec 4.2 step 3: slots 0..m-1 are streams 0..m-1 (p = 1); slots m..k-1 the
// k-m streams i >= m with the highest s_i, descending, ties to the lower index (p = s_i).
template <typename T>
void SelectActive(int N, int k, int m, const T* s, int* idx, T* p) {
  int order[256];
  for (int j = 0; j < m; ++j) {
    idx[j] = j;
    p[j] = T(1);
  }
  const int cand = N - m;
  for (int i = 0; i < cand; ++i) order[i] = m + i;
  std::partial_sort(order, order + (k - m), order + cand,
                    [s](int a, int b) { return s[a] > s[b] || (s[a] == s[b] && a < b); });
  for (int j = m; j < k; ++j) {
    idx[j] = order[j - m];
    p[j] = s[idx[j]];
  }
}

template <typename T>
inline T Sigmoid(T z) {
  return T(1) / (T(1) + std::exp(-z));
}

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_SINKHORN_H_
