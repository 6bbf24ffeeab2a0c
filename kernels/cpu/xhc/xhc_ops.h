#ifndef XHC_KERNELS_CPU_XHC_XHC_OPS_H_
#define XHC_KERNELS_CPU_XHC_XHC_OPS_H_

// Optimized CPU kernels of the xHC / mHC residual sublayer (model-spec.md section 4), expand
// (2.2) and head reduce (2.4). Float32, fused passes over the state, OpenMP over tokens, the
// big projections through OpenBLAS sgemm. The reference with the same contract is
// xhc_reference.h (namespace ref).
//
// How a model runs one sublayer (X is the micro-batch state (B,T,N,C), n = B*T tokens):
//   forward:   XhcPre(cfg, P, B, T, C, X, u, &cache)      u (B,T,C) = dense read of X
//              out = F(u)                                  (attention or MLP, caller's)
//              XhcPost(cfg, P, out, X, &cache)             X updated IN PLACE: only the k
//                                                          active streams per token written
//   backward (I = input gradient, callable now; W = weight gradient, callable any time later,
//   as long as the cache, X_in and the parameters are unchanged):
//     I.1      XhcBackwardOut(cfg, P, dX, &cache, d_out)   dX: d loss / d X_new (B,T,N,C)
//              du = F_backward(d_out)                      (caller's)
//     I.2      XhcBackwardInput(cfg, P, X_in, du, dX, &cache)
//                                                          dX overwritten IN PLACE with
//                                                          d loss / d X_in
//     W        XhcBackwardWeights(cfg, P, X_in, cache, grads)   grads += ...
//
// Contract:
//  * X_in is a saved copy of the state as it was when XhcPre ran (this sublayer's input). The
//    caller keeps it (note the output of sublayer s is the input of s+1, so one copy per
//    sublayer boundary serves both). The cache itself keeps the k old active streams (xa),
//    which XhcPost needs while it overwrites them.
//  * The caller allocates X, u, out, dX, d_out, du, X_in and the gradients; the kernels size
//    the cache (resized by XhcPre, reusable across micro-batches of the same shape).
//  * XhcBackwardOut stashes dz of the router, res and post maps and the conv-output
//    gradients; XhcBackwardInput stashes dz of the read map. XhcBackwardWeights only reads
//    the cache, so I.1, I.2 and W of different micro-batches interleave freely if each
//    micro-batch has its own cache.
//  * Determinism: per-token work is independent of the thread that does it; reductions over
//    tokens (weight gradients) run in a fixed order (sequential over tokens, or OpenBLAS
//    level-3 whose threads split only the output matrix), so results are bit-identical
//    for any OMP_NUM_THREADS / OPENBLAS_NUM_THREADS.

#include "absl/status/status.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels {

absl::Status XhcPre(const XhcConfig& cfg, const XhcParams& P, int B, int T, int C, const float* X,
                    float* u, XhcCache* cache);
absl::Status XhcPost(const XhcConfig& cfg, const XhcParams& P, const float* out, float* X,
                     XhcCache* cache);
absl::Status XhcBackwardOut(const XhcConfig& cfg, const XhcParams& P, const float* dX_new,
                            XhcCache* cache, float* d_out);
absl::Status XhcBackwardInput(const XhcConfig& cfg, const XhcParams& P, const float* X_in,
                              const float* du, float* dX, XhcCache* cache);
// I.2 with the restore fused: X holds the state AFTER the sublayer and ends as its input
// (state_restore.h's RestoreInput, done per token inside the pass, just before the pass reads
// the token: one pass over the active rows fewer). Same bits as RestoreInput(*cache, X) then
// XhcBackwardInput(cfg, P, X, du, dX, cache). Not for xhc_flash, whose sublayers take the
// window's entry state.
absl::Status XhcBackwardInputRestoring(const XhcConfig& cfg, const XhcParams& P, float* X,
                                       const float* du, float* dX, XhcCache* cache);
absl::Status XhcBackwardWeights(const XhcConfig& cfg, const XhcParams& P, const float* X_in,
                                const XhcCache& cache, const XhcGrads& grads);

// Expand: X (n,N,C) from e (n,C); backward writes de (n,C) = sum over streams of dX.
void ExpandForward(int n, int N, int C, const float* e, float* X);
void ExpandBackward(int n, int N, int C, const float* dX, float* de);

// Head reduce: y (n,C) from X (n,N,C). BackwardInput writes dX (n,N,C) and stashes dz in the
// cache; BackwardWeights accumulates into grads.
absl::Status HeadReduceForward(const HeadParams& P, int n, int N, int C, const float* X, float* y,
                               HeadCache* cache);
absl::Status HeadReduceBackwardInput(const HeadParams& P, int n, int N, int C, const float* X,
                                     const float* dy, HeadCache* cache, float* dX);
absl::Status HeadReduceBackwardWeights(const HeadParams& P, int n, int N, int C, const float* X,
                                       const HeadCache& cache, const HeadGrads& grads);

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_XHC_OPS_H_
