#ifndef XHC_KERNELS_CUDA_CUDA_COMMON_CUH_
#define XHC_KERNELS_CUDA_CUDA_COMMON_CUH_

// Device helpers shared by the .cu files (nvcc only).

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/xhc_cuda.h"

// Every launch is followed by this: a bad configuration (too much shared memory, grid too
// large) surfaces at the call that caused it rather than at the next synchronisation.
#define XHC_LAUNCH_CHECK()                              \
  do {                                                  \
    cudaError_t e_ = cudaGetLastError();                \
    if (e_ != cudaSuccess) return static_cast<int>(e_); \
  } while (0)

#define XHC_CUDA_TRY(expr)                              \
  do {                                                  \
    cudaError_t e_ = (expr);                            \
    if (e_ != cudaSuccess) return static_cast<int>(e_); \
  } while (0)

#define XHC_TRY(expr)       \
  do {                      \
    int e_ = (expr);        \
    if (e_ != 0) return e_; \
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

// out[q] = the sum over the block's threads of v[q], for q < count (count <= 32 * NW);
// deterministic (warp trees, then the NW warps in order). wred: NW x NV shared floats; out
// shared too, read by every thread after the call (which ends on a barrier).
template <int NV, int NW>
__device__ __forceinline__ void block_sum_many(const float* v, float (*wred)[NV], float* out,
                                               int count) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int q = 0; q < NV; ++q) {
    const float t = warp_sum(v[q]);
    if (lane == 0) wred[warp][q] = t;
  }
  __syncthreads();
  if (threadIdx.x < count) {
    float t = 0.f;
    for (int w = 0; w < NW; ++w) t += wred[w][threadIdx.x];
    out[threadIdx.x] = t;
  }
  __syncthreads();
}

// Sinkhorn of spec 4.2 for one k x k matrix, by one thread (k <= 8: the matrix lives in
// registers / L1-resident local memory). Columns then rows, `iters` times.
__device__ inline void sinkhorn_forward(int k, int iters, const float* z, float* h) {
  const int kk = k * k;
  float zmax = z[0];
  for (int q = 1; q < kk; ++q) zmax = fmaxf(zmax, z[q]);
  for (int q = 0; q < kk; ++q) h[q] = expf(z[q] - zmax);
  for (int it = 0; it < iters; ++it) {
    for (int c = 0; c < k; ++c) {
      float sum = 0.f;
      for (int r = 0; r < k; ++r) sum += h[r * k + c];
      const float inv = 1.f / (sum + 1e-6f);
      for (int r = 0; r < k; ++r) h[r * k + c] *= inv;
    }
    for (int r = 0; r < k; ++r) {
      float sum = 0.f;
      for (int c = 0; c < k; ++c) sum += h[r * k + c];
      const float inv = 1.f / (sum + 1e-6f);
      for (int c = 0; c < k; ++c) h[r * k + c] *= inv;
    }
  }
}

// dz = d sinkhorn(z)/dz applied to dh (dz overwritten). The 2*iters normalisation steps are
// recomputed on chip into `hist` ((2*iters+1)*k*k floats of shared memory owned by the
// calling thread) instead of being stored by the forward (spec 4.2: recompute).
__device__ inline void sinkhorn_backward(int k, int iters, const float* z, const float* dh,
                                         float* dz, float* hist) {
  const int kk = k * k, steps = 2 * iters;
  int amax = 0;
  for (int q = 1; q < kk; ++q)
    if (z[q] > z[amax]) amax = q;
  for (int q = 0; q < kk; ++q) hist[q] = expf(z[q] - z[amax]);
  for (int s = 0; s < steps; ++s) {
    const float* x = hist + s * kk;
    float* y = hist + (s + 1) * kk;
    const bool cols = (s % 2 == 0);
    for (int g = 0; g < k; ++g) {
      float sum = 0.f;
      for (int e = 0; e < k; ++e) sum += cols ? x[e * k + g] : x[g * k + e];
      const float inv = 1.f / (sum + 1e-6f);
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        y[q] = x[q] * inv;
      }
    }
  }
  float grad[kMaxActive * kMaxActive];
  for (int q = 0; q < kk; ++q) grad[q] = dh[q];
  for (int s = steps - 1; s >= 0; --s) {
    const float* x = hist + s * kk;
    const float* y = hist + (s + 1) * kk;
    const bool cols = (s % 2 == 0);
    for (int g = 0; g < k; ++g) {
      float sum = 0.f, dot = 0.f;
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        sum += x[q];
        dot += grad[q] * y[q];
      }
      const float inv = 1.f / (sum + 1e-6f);
      for (int e = 0; e < k; ++e) {
        const int q = cols ? e * k + g : g * k + e;
        grad[q] = (grad[q] - dot) * inv;
      }
    }
  }
  float total = 0.f;
  for (int q = 0; q < kk; ++q) {
    dz[q] = grad[q] * hist[q];
    total += dz[q];
  }
  dz[amax] -= total;  // the max is a function of z too
}

// V consecutive bf16 values as floats: one 16-byte load for V = 8, one 8-byte load for V = 4
// (caller guarantees alignment: C % V == 0), scalar otherwise.
template <int V>
__device__ __forceinline__ void load_v(const bf16_t* p, float* out) {
  if constexpr (V == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  } else if constexpr (V == 4) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = ld(p + i);
  }
}
template <int V>
__device__ __forceinline__ void store_v(bf16_t* p, const float* in) {
  if constexpr (V == 8) {
    uint4 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else if constexpr (V == 4) {
    uint2 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
    h[0] = __floats2bfloat162_rn(in[0], in[1]);
    h[1] = __floats2bfloat162_rn(in[2], in[3]);
    *reinterpret_cast<uint2*>(p) = raw;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) st(p + i, in[i]);
  }
}

// out: the rows of W = W0 (R0 rows; zero when W0 is null) over W1 (R1 rows), both row-major
// with L columns, as bf16 hi (out[0, R L)) and lo = bf16(w - hi) (out[R L, 2 R L)), and, when
// kBlocks = 3, hi again (out[2 R L, 3 R L)): a bf16 x bf16 GEMM against these blocks keeps
// float32 accuracy (hi.hi + lo.hi for the forward's bf16 state; hi.hi + lo.hi + hi.lo with
// the input gradient's coefficients split the same way).
template <int kBlocks>
__global__ void split_rows_kernel(const float* __restrict__ W0, int R0,
                                  const float* __restrict__ W1, int R1, long L, bf16_t* out) {
  static_assert(kBlocks == 2 || kBlocks == 3, "hi, lo[, hi]");
  const long R = R0 + R1, total = R * L;
  for (long e = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = e / L, col = e % L;
    const float w = row < R0 ? (W0 ? W0[row * L + col] : 0.f) : W1[(row - R0) * L + col];
    const __nv_bfloat16 hi = __float2bfloat16(w);
    *reinterpret_cast<__nv_bfloat16*>(out + e) = hi;
    st(out + total + e, w - __bfloat162float(hi));
    if constexpr (kBlocks == 3) *reinterpret_cast<__nv_bfloat16*>(out + 2 * total + e) = hi;
  }
}

inline int ceil_div(long a, long b) { return static_cast<int>((a + b - 1) / b); }
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace xhc::cuda

#endif  // XHC_KERNELS_CUDA_CUDA_COMMON_CUH_
