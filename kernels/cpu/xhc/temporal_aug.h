#ifndef XHC_KERNELS_CPU_XHC_TEMPORAL_AUG_H_
#define XHC_KERNELS_CPU_XHC_TEMPORAL_AUG_H_

// Optimized temporal augmentation of one token (spec 4.2 step 5): causal depthwise
// convolutions and modified Gram-Schmidt, forward and backward. Channel loops vectorize.

#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels::cpu {

// g (r, C): g_j = sum_{tau < kappa_j, tau <= t} w_j[tau] * out_t_minus_tau, where token t' of
// the same sequence is at out_seq + t' * stride.
void ConvToken(const XhcDims& d, const float* const* w, const float* out_seq, int stride, int t,
               float* g);

// v (K, C) with v[0] = out on entry; writes v[1..r]. hist (r, r, C) may be null in forward;
// else hist[j-1][i] = the running vector before v_i is taken out of it, for i >= 1 (for
// i = 0 that is g_j itself, which the backward reads from g).
void GramSchmidtToken(const XhcDims& d, bool orthogonalise, const float* g, float* v, float* hist);

// dv (K, C): d loss / d aug on entry, on exit dv[0] is the direct d loss / d out.
// dg (r, C): d loss / d conv outputs. g and hist: the forward's (GramSchmidtToken).
void GramSchmidtBackwardToken(const XhcDims& d, bool orthogonalise, const float* v, const float* g,
                              const float* hist, float* dv, float* dg);

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_TEMPORAL_AUG_H_
