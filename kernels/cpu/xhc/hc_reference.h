#ifndef XHC_KERNELS_CPU_XHC_HC_REFERENCE_H_
#define XHC_KERNELS_CPU_XHC_HC_REFERENCE_H_

// Naive reference of the original dynamic Hyper-Connections sublayer (model-spec.md 4.4),
// written as the spec states it, one token at a time, templated on the scalar for finite
// differences. The public entry points (xhc_reference.h) dispatch here for type kHc; the
// contract (in-place X, I/W split, accumulating gradients) is theirs.
//
// Parameters (XhcParamsT fields, hc shapes): pre.weight [1, C], pre.bias [N], pre.alpha;
// post.weight [1, C], post.bias [N], post.alpha; res.weight [N, C], res.bias [N*N] (entry
// a*N + i: output stream a, input stream i), res.alpha.

#include "absl/status/status.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels::ref {

template <typename R>
absl::Status HcPre(const XhcDims& d, const XhcParamsT<R>& P, int B, int T_len, const R* X, R* u,
                   XhcCacheT<R>* cache);
template <typename R>
absl::Status HcPost(const XhcDims& d, const R* out, R* X, XhcCacheT<R>* cache);
template <typename R>
absl::Status HcBackwardOut(const XhcDims& d, const R* dX_new, XhcCacheT<R>* cache, R* d_out);
template <typename R>
absl::Status HcBackwardInput(const XhcDims& d, const XhcParamsT<R>& P, const R* X_in, const R* du,
                             R* dX, XhcCacheT<R>* cache);
template <typename R>
absl::Status HcBackwardWeights(const XhcDims& d, const XhcParamsT<R>& P, const R* X_in,
                               const XhcCacheT<R>& cache, const XhcGradsT<R>& G);

}  // namespace xhc::kernels::ref

#endif  // XHC_KERNELS_CPU_XHC_HC_REFERENCE_H_
