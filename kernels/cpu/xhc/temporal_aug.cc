#include "kernels/cpu/xhc/temporal_aug.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/cpu/xhc/cpu_util.h"

namespace xhc::kernels::cpu {

XHC_CLONES void ConvToken(const XhcDims& d, const float* const* w, const float* out_seq, int stride,
                          int t, float* g) {
  const int C = d.C;
  for (int j = 0; j < d.r; ++j) {
    // g_j = sum over tau <= t of w_j[tau] * out[t - tau], tau in order from 0.
    const int taus = std::min(d.kernels[j], t + 1);
    AccumulateProducts(C, taus, w[j], C, out_seq + static_cast<ptrdiff_t>(t) * stride, -stride,
                       g + j * C, false);
  }
}

// dst = src - (<src, vi> / norm) vi, the Axpy of the in-place form (dst[c] = src[c] + a vi[c],
// the same multiply and add) written out of place: the step's input stays where it was.
XHC_INLINE void ProjectOut(int C, const float* src, const float* vi, float norm, float* dst) {
  const float a = -Dot(C, src, vi) / norm;
  for (int c = 0; c < C; ++c) dst[c] = src[c] + a * vi[c];
}

XHC_CLONES void GramSchmidtToken(const XhcDims& d, bool orthogonalise, const float* g, float* v,
                                 float* hist) {
  const int C = d.C;
  float norms[64];  // <v_i, v_i> + eps, computed once per v_i (r < 63 is validated by use)
  if (orthogonalise) norms[0] = Dot(C, v, v) + static_cast<float>(kGramSchmidtEps);
  for (int j = 1; j <= d.r; ++j) {
    float* vj = v + j * C;
    const float* gj = g + (j - 1) * C;
    if (!orthogonalise) {
      std::memcpy(vj, gj, sizeof(float) * C);
      continue;
    }
    // Step i takes v_i out of the running vector: from g_j, each step's result straight into
    // the next step's history row (or v_j after the last), no copies
    // (docs/design/fused-xhc-sublayer.md).
    const float* src = gj;
    for (int i = 0; i < j; ++i) {
      float* dst = hist && i + 1 < j ? hist + ((j - 1) * d.r + i + 1) * C : vj;
      ProjectOut(C, src, v + i * C, norms[i], dst);
      src = dst;
    }
    norms[j] = Dot(C, vj, vj) + static_cast<float>(kGramSchmidtEps);
  }
}

XHC_CLONES void GramSchmidtBackwardToken(const XhcDims& d, bool orthogonalise, const float* v,
                                         const float* g, const float* hist, float* dv, float* dg) {
  const int C = d.C;
  for (int j = d.r; j >= 1; --j) {
    float* __restrict cur = dg + (j - 1) * C;
    std::memcpy(cur, dv + j * C, sizeof(float) * C);
    if (!orthogonalise) continue;
    for (int i = j - 1; i >= 0; --i) {
      // g' = g - coef v_i, coef = <g, v_i> / S: dg = dg' - a v_i / S,
      // dv_i += -coef dg' - a (g / S - 2 coef v_i / S) with a = <dg', v_i>.
      const float* __restrict gb = i == 0 ? g + (j - 1) * C : hist + ((j - 1) * d.r + i) * C;
      const float* __restrict vi = v + i * C;
      float* __restrict dvi = dv + i * C;
      const float S = Dot(C, vi, vi) + static_cast<float>(kGramSchmidtEps);
      const float coef = Dot(C, gb, vi) / S;
      const float a = Dot(C, cur, vi);
      const float aS = a / S, two = 2.0f * coef * a / S;
      for (int c = 0; c < C; ++c) dvi[c] += -coef * cur[c] - aS * gb[c] + two * vi[c];
      for (int c = 0; c < C; ++c) cur[c] -= aS * vi[c];
    }
  }
}

}  // namespace xhc::kernels::cpu
