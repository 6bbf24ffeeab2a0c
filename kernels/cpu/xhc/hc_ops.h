#ifndef XHC_KERNELS_CPU_XHC_HC_OPS_H_
#define XHC_KERNELS_CPU_XHC_HC_OPS_H_

// Optimized hc sublayer (model-spec.md 4.4), behind the public entry points of xhc_ops.h
// (which dispatch here for type kHc and own the checks). Same math and cache layout as the
// reference (hc_reference.cc): per token the (N, N+2) dots of each stream's rms against the
// stacked map rows [pre; post; res], tanh maps, a dense read, an unconstrained N x N mix.
// Tokens run in parallel; weight gradients are one deterministic sgemm over (token, stream)
// rows, so results do not depend on the thread count.

#include "absl/status/status.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels::hc {

absl::Status Pre(const XhcDims& d, const XhcParams& P, int B, int T_len, const float* X, float* u,
                 XhcCache* cache);
absl::Status Post(const XhcDims& d, const float* out, float* X, XhcCache* cache);
absl::Status BackwardOut(const XhcDims& d, const float* dX_new, XhcCache* cache, float* d_out);
absl::Status BackwardInput(const XhcDims& d, const XhcParams& P, const float* X_in, const float* du,
                           float* dX, XhcCache* cache);
absl::Status BackwardWeights(const XhcDims& d, const XhcParams& P, const float* X_in,
                             const XhcCache& cache, const XhcGrads& G);

}  // namespace xhc::kernels::hc

#endif  // XHC_KERNELS_CPU_XHC_HC_OPS_H_
