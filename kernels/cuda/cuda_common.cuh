#ifndef XHC_KERNELS_CUDA_CUDA_COMMON_CUH_
#define XHC_KERNELS_CUDA_CUDA_COMMON_CUH_

// Device helpers shared by the .cu files (nvcc only).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/xhc_cuda.h"

// Every launch is followed by this: a bad configuration (too much shared memory, grid too
// large) surfaces at the call that caused it rather than at the next synchronisation.
#define XHC_LAUNCH_CHECK()                      \
  do {                                          \
    cudaError_t e_ = cudaGetLastError();        \
    if (e_ != cudaSuccess) return static_cast<int>(e_); \
  } while (0)

#define XHC_CUDA_TRY(expr)                                    \
  do {                                                        \
    cudaError_t e_ = (expr);                                  \
    if (e_ != cudaSuccess) return static_cast<int>(e_);       \
  } while (0)

#define XHC_TRY(expr)          \
  do {                         \
    int e_ = (expr);           \
    if (e_ != 0) return e_;    \
  } while (0)

namespace xhc::cuda {

__device__ __forceinline__ float ld(const bf16_t* p) {
  return __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(p));
}
__device__ __forceinline__ void st(bf16_t* p, float v) {
  *reinterpret_cast<__nv_bfloat16*>(p) = __float2bfloat16(v);
}
__device__ __forceinline__ float sigmoidf_(float z) { return 1.f / (1.f + __expf(-z)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block, returned to every thread; deterministic (fixed tree). `red` needs
// 32 floats of shared memory; blockDim.x a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < nw ? red[lane] : 0.f;
  return warp_sum(t);
}

inline int ceil_div(long a, long b) { return static_cast<int>((a + b - 1) / b); }
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace xhc::cuda

#endif  // XHC_KERNELS_CUDA_CUDA_COMMON_CUH_
