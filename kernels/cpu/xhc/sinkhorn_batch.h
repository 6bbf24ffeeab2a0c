#ifndef XHC_KERNELS_CPU_XHC_SINKHORN_BATCH_H_
#define XHC_KERNELS_CPU_XHC_SINKHORN_BATCH_H_

// Sinkhorn forward and backward of 8 tokens' matrices at once (sinkhorn.h's SinkhornForward /
// SinkhornBackward<float>), one token per lane of an 8-float vector. Every lane does the same
// operations in the same order as the scalar version (the library builds with
// -ffp-contract=off; division is IEEE in both; exp is the same expf, called per lane), so each
// token's result is the scalar one bit for bit (sinkhorn_batch_test). Why: the scalar
// versions spend their time in ~480 dependent divisions per token (20 iterations of k column
// and k row normalisations, forward and the backward's recomputation and its reverse pass),
// which one vector division does for 8 tokens (docs/design/fused-xhc-sublayer.md).
//
// Layout: z, dh, h, dz are (8, k*k), lane-major (token l's matrix at l * k * k, row-major).
// Lanes past the last token of a block are padded by the caller (any finite values) and
// their results ignored.

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels::cpu {

constexpr int kSinkLanes = 8;
typedef int V8i __attribute__((vector_size(8 * sizeof(int))));

// Lane l of the result = in[l * stride + q].
XHC_INLINE V8 GatherLanes(const float* in, int stride, int q) {
  V8 v;
  for (int l = 0; l < kSinkLanes; ++l) v[l] = in[l * stride + q];
  return v;
}

// exp of every lane (expf, as the scalar version calls it).
XHC_INLINE V8 ExpLanes(V8 x) {
  for (int l = 0; l < kSinkLanes; ++l) x[l] = std::exp(x[l]);
  return x;
}

// One normalisation step of the iteration, in place: for each group g (a column when `cols`,
// else a row) the k entries are divided by (their sum + eps).
XHC_INLINE void NormalizeGroups(int k, bool cols, const V8* x, V8* y) {
  const V8 one = V8{} + 1.0f, eps = V8{} + static_cast<float>(kSinkhornEps);
  for (int g = 0; g < k; ++g) {
    V8 sum = {};
    for (int e = 0; e < k; ++e) sum += x[cols ? e * k + g : g * k + e];
    const V8 inv = one / (sum + eps);
    for (int e = 0; e < k; ++e) {
      const int q = cols ? e * k + g : g * k + e;
      y[q] = x[q] * inv;
    }
  }
}

// h = sinkhorn(z), 8 tokens; m: scratch of k*k vectors.
XHC_INLINE void SinkhornForward8(int k, int iters, const float* z, float* h, V8* m) {
  const int kk = k * k;
  V8 zmax = GatherLanes(z, kk, 0);
  for (int q = 1; q < kk; ++q) {
    const V8 zq = GatherLanes(z, kk, q);
    zmax = zmax < zq ? zq : zmax;  // std::max(zmax, zq), lane by lane
  }
  for (int q = 0; q < kk; ++q) m[q] = ExpLanes(GatherLanes(z, kk, q) - zmax);
  for (int it = 0; it < iters; ++it) {
    NormalizeGroups(k, true, m, m);
    NormalizeGroups(k, false, m, m);
  }
  for (int l = 0; l < kSinkLanes; ++l)
    for (int q = 0; q < kk; ++q) h[l * kk + q] = m[q][l];
}

// dz += d sinkhorn(z) / dz applied to dh, 8 tokens; mats: scratch of (2 iters + 2) k*k vectors.
XHC_INLINE void SinkhornBackward8(int k, int iters, const float* z, const float* dh, float* dz,
                                  V8* mats) {
  const int kk = k * k, steps = 2 * iters;
  V8 zmax = GatherLanes(z, kk, 0);
  V8i amax = {};
  for (int q = 1; q < kk; ++q) {  // first index of the maximum, as the scalar `z[q] > z[amax]`
    const V8 zq = GatherLanes(z, kk, q);
    const V8i greater = zq > zmax;
    zmax = greater ? zq : zmax;
    amax = greater ? (V8i{} + q) : amax;
  }
  for (int q = 0; q < kk; ++q) mats[q] = ExpLanes(GatherLanes(z, kk, q) - zmax);
  for (int s = 0; s < steps; ++s)
    NormalizeGroups(k, s % 2 == 0, mats + s * kk, mats + (s + 1) * kk);
  V8* grad = mats + (steps + 1) * kk;
  for (int q = 0; q < kk; ++q) grad[q] = GatherLanes(dh, kk, q);
  const V8 one = V8{} + 1.0f, eps = V8{} + static_cast<float>(kSinkhornEps);
  for (int s = steps - 1; s >= 0; --s) {
    const V8* x = mats + s * kk;
    const V8* y = mats + (s + 1) * kk;
    const bool cols = (s % 2 == 0);
    for (int g = 0; g < k; ++g) {
      V8 sum = {}, dot = {};
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        sum += x[q];
        dot += grad[q] * y[q];
      }
      const V8 inv = one / (sum + eps);
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        grad[q] = (grad[q] - dot) * inv;
      }
    }
  }
  V8 total = {};
  for (int q = 0; q < kk; ++q) {
    const V8 g = grad[q] * mats[q];
    for (int l = 0; l < kSinkLanes; ++l) dz[l * kk + q] += g[l];
    total += g;
  }
  for (int l = 0; l < kSinkLanes; ++l) dz[l * kk + amax[l]] -= total[l];
}

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_SINKHORN_BATCH_H_
