#ifndef XHC_RUNTIME_MODEL_XHC_KERNELS_H_
#define XHC_RUNTIME_MODEL_XHC_KERNELS_H_

// One name for the xHC residual kernels whichever implementation runs: the reference
// (templated, double for gradient checks) or the optimized float32 path.

#include "absl/status/status.h"
#include "kernels/cpu/xhc/state_restore.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_reference.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::model {

// The reference path (any scalar type).
template <typename T, bool kOptimized>
struct XhcKernels {
  using Config = kernels::XhcConfig;
  using Params = kernels::XhcParamsT<T>;
  using Grads = kernels::XhcGradsT<T>;
  using Cache = kernels::XhcCacheT<T>;
  using HeadParams = kernels::HeadParamsT<T>;
  using HeadGrads = kernels::HeadGradsT<T>;
  using HeadCache = kernels::HeadCacheT<T>;

  static absl::Status Pre(const Config& c, const Params& P, int B, int T_len, int C, const T* X,
                          T* u, Cache* cache) {
    return kernels::ref::XhcPre<T>(c, P, B, T_len, C, X, u, cache);
  }
  static absl::Status Post(const Config& c, const Params& P, const T* out, T* X, Cache* cache) {
    return kernels::ref::XhcPost<T>(c, P, out, X, cache);
  }
  static absl::Status BackwardOut(const Config& c, const Params& P, const T* dX_new, Cache* cache,
                                  T* d_out) {
    return kernels::ref::XhcBackwardOut<T>(c, P, dX_new, cache, d_out);
  }
  static absl::Status BackwardInput(const Config& c, const Params& P, const T* X_in, const T* du,
                                    T* dX, Cache* cache) {
    return kernels::ref::XhcBackwardInput<T>(c, P, X_in, du, dX, cache);
  }
  // X: the state after the sublayer in, its input out (xhc_ops.h); not for xhc_flash.
  static absl::Status BackwardInputRestoring(const Config& c, const Params& P, T* X, const T* du,
                                             T* dX, Cache* cache) {
    if (c.type == kernels::ResidualType::kXhcFlash) {
      return absl::InvalidArgumentError("BackwardInputRestoring: not for xhc_flash");
    }
    kernels::RestoreInput(*cache, X);
    return kernels::ref::XhcBackwardInput<T>(c, P, X, du, dX, cache);
  }
  static absl::Status BackwardWeights(const Config& c, const Params& P, const T* X_in,
                                      const Cache& cache, const Grads& grads) {
    return kernels::ref::XhcBackwardWeights<T>(c, P, X_in, cache, grads);
  }
  static void ExpandForward(int n, int N, int C, const T* e, T* X) {
    kernels::ref::ExpandForward<T>(n, N, C, e, X);
  }
  static void ExpandBackward(int n, int N, int C, const T* dX, T* de) {
    kernels::ref::ExpandBackward<T>(n, N, C, dX, de);
  }
  static absl::Status HeadForward(const HeadParams& P, int n, int N, int C, const T* X, T* y,
                                  HeadCache* cache) {
    return kernels::ref::HeadReduceForward<T>(P, n, N, C, X, y, cache);
  }
  static absl::Status HeadBackwardInput(const HeadParams& P, int n, int N, int C, const T* X,
                                        const T* dy, HeadCache* cache, T* dX) {
    return kernels::ref::HeadReduceBackwardInput<T>(P, n, N, C, X, dy, cache, dX);
  }
  static absl::Status HeadBackwardWeights(const HeadParams& P, int n, int N, int C, const T* X,
                                          const HeadCache& cache, const HeadGrads& grads) {
    return kernels::ref::HeadReduceBackwardWeights<T>(P, n, N, C, X, cache, grads);
  }
};

// The optimized float32 path (kernels/cpu/xhc/xhc_ops.h): fused passes, OpenMP over tokens.
template <>
struct XhcKernels<float, true> {
  using T = float;
  using Config = kernels::XhcConfig;
  using Params = kernels::XhcParams;
  using Grads = kernels::XhcGrads;
  using Cache = kernels::XhcCache;
  using HeadParams = kernels::HeadParams;
  using HeadGrads = kernels::HeadGrads;
  using HeadCache = kernels::HeadCache;

  static absl::Status Pre(const Config& c, const Params& P, int B, int T_len, int C, const T* X,
                          T* u, Cache* cache) {
    return kernels::XhcPre(c, P, B, T_len, C, X, u, cache);
  }
  static absl::Status Post(const Config& c, const Params& P, const T* out, T* X, Cache* cache) {
    return kernels::XhcPost(c, P, out, X, cache);
  }
  static absl::Status BackwardOut(const Config& c, const Params& P, const T* dX_new, Cache* cache,
                                  T* d_out) {
    return kernels::XhcBackwardOut(c, P, dX_new, cache, d_out);
  }
  static absl::Status BackwardInput(const Config& c, const Params& P, const T* X_in, const T* du,
                                    T* dX, Cache* cache) {
    return kernels::XhcBackwardInput(c, P, X_in, du, dX, cache);
  }
  static absl::Status BackwardInputRestoring(const Config& c, const Params& P, T* X, const T* du,
                                             T* dX, Cache* cache) {
    return kernels::XhcBackwardInputRestoring(c, P, X, du, dX, cache);
  }
  static absl::Status BackwardWeights(const Config& c, const Params& P, const T* X_in,
                                      const Cache& cache, const Grads& grads) {
    return kernels::XhcBackwardWeights(c, P, X_in, cache, grads);
  }
  static void ExpandForward(int n, int N, int C, const T* e, T* X) {
    kernels::ExpandForward(n, N, C, e, X);
  }
  static void ExpandBackward(int n, int N, int C, const T* dX, T* de) {
    kernels::ExpandBackward(n, N, C, dX, de);
  }
  static absl::Status HeadForward(const HeadParams& P, int n, int N, int C, const T* X, T* y,
                                  HeadCache* cache) {
    return kernels::HeadReduceForward(P, n, N, C, X, y, cache);
  }
  static absl::Status HeadBackwardInput(const HeadParams& P, int n, int N, int C, const T* X,
                                        const T* dy, HeadCache* cache, T* dX) {
    return kernels::HeadReduceBackwardInput(P, n, N, C, X, dy, cache, dX);
  }
  static absl::Status HeadBackwardWeights(const HeadParams& P, int n, int N, int C, const T* X,
                                          const HeadCache& cache, const HeadGrads& grads) {
    return kernels::HeadReduceBackwardWeights(P, n, N, C, X, cache, grads);
  }
};

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_XHC_KERNELS_H_
