#ifndef XHC_KERNELS_CPU_NN_MATMUL_H_
#define XHC_KERNELS_CPU_NN_MATMUL_H_

// nn.Linear without bias, y = x · Wᵀ with W stored [out, in] (model-spec §2), through
// OpenBLAS sgemm. The backward is split so a pipeline schedule can run the input gradient
// (on the critical path) now and the weight gradient later (zero-bubble schedules).
//
// Contract for all three: row-major, densely packed, caller-allocated buffers; outputs do
// not alias inputs. Deterministic for any OpenMP thread count: the output is cut into
// fixed-size row blocks, each one single-threaded sgemm call on an OpenMP thread. To make
// that hold these calls set OpenBLAS's own thread count to 1 (process-wide).

#include "absl/status/status.h"

namespace xhc::nn {

// x is (M,K), w is (N,K), y is (M,N). Overwrites y.
absl::Status MatmulForward(float* y, const float* x, const float* w, int M, int K, int N);

// dy is (M,N), w is (N,K), dx is (M,K): dx = dy · W. Overwrites dx, or adds into it when
// accumulate is true (q, k and v all read the same normalized input).
absl::Status MatmulBackwardInput(float* dx, const float* dy, const float* w, int M, int K, int N,
                                 bool accumulate = false);

// dy is (M,N), x is (M,K), dw is (N,K): dw += dyᵀ · x (always accumulates, so gradients of
// several micro-batches sum in the caller's buffer).
absl::Status MatmulBackwardWeight(float* dw, const float* dy, const float* x, int M, int K, int N);

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_MATMUL_H_
