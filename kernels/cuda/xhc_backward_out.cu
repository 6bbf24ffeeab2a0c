// Input gradient, first half (XhcBackwardOutLaunch: d_out from dX_new), split like the CPU
// path (xhc_ops.h):
//   post_backward_kernel   per token: gathers the active gradients dA_j = dX_new[idx_j],
//                          all dot products of the post map / mixing / routing weight in one
//                          pass, d aug, then the Gram-Schmidt backward with the history
//                          rebuilt from the stored coefficients (nothing (r,r,C) is ever
//                          stored).
//   sinkhorn_backward16_kernel  the Sinkhorn backward, recomputing the iterations on chip:
//                          16 lanes per token for k <= 4 (sinkhorn_backward_kernel, one
//                          thread per token, for larger k).
//   conv_input_grad_kernel all r convolution branches' input gradients in one walk per
//                          (channel, 64 tokens).

#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// V channels a step; MB: the blocks per SM the registers must allow.
template <int MK, int K, int V, int MB>
__global__ void __launch_bounds__(kThreads, MB)
    post_backward_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X_in,
                         const bf16_t* __restrict__ out, const bf16_t* __restrict__ dX_new,
                         XhcDevCache c, bf16_t* __restrict__ d_out) {
  constexpr int NA = MK * K + MK * MK;  // dot(aug_q, dA_j), then dot(dA_j, Xa_j')
  // K > 1: daug (K, C) float32, then v_0..v_r (K, C) bf16 (they are bf16 in global memory,
  // so nothing is lost; 48 rather than 64 KiB per block at C = 2048: 4 blocks per SM, not 3).
  extern __shared__ float dyn[];
  __shared__ float hp[MK * K], hr[MK * MK], p[MK], dots[NA], wred[kWarps][NA], red[32];
  __shared__ int idx[MK];
  const long tok = blockIdx.x;
  const int k = s.k, C = s.C, N = s.N, r = s.r, kk = k * k, Q = s.Q();
  bf16_t* vsh = reinterpret_cast<bf16_t*>(dyn + K * C);
  if (threadIdx.x < k * K) hp[threadIdx.x] = c.hpost[tok * k * K + threadIdx.x];
  if (threadIdx.x < kk) hr[threadIdx.x] = c.hres[tok * kk + threadIdx.x];
  if (threadIdx.x < k) {
    idx[threadIdx.x] = c.idx[tok * k + threadIdx.x];
    p[threadIdx.x] = c.p[tok * k + threadIdx.x];
  }
  __syncthreads();
  const long D = s.D();
  float acc[NA];
#pragma unroll
  for (int q = 0; q < NA; ++q) acc[q] = 0.f;
  // V consecutive channels per step (C % V == 0): one 8-byte load per row instead of V
  // scalar ones. One channel a step, the kernel was issue-bound (1.19 G warp instructions,
  // SM throughput 77%: docs/design/cuda-kernels.md), most of them address arithmetic and
  // scalar loads.
  for (int c0 = threadIdx.x * V; c0 < C; c0 += kThreads * V) {
    float xa[MK][V], v[K][V], d[K][V];
#pragma unroll
    for (int j = 0; j < MK; ++j) {
      if (j < k) {
        load_v<V>(X_in + tok * D + static_cast<long>(idx[j]) * C + c0, xa[j]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) xa[j][e] = 0.f;
      }
    }
    load_v<V>(out + tok * C + c0, v[0]);
#pragma unroll
    for (int q = 1; q < K; ++q) load_v<V>(c.aug + (tok * r + q - 1) * C + c0, v[q]);
    if (K > 1) {
#pragma unroll
      for (int q = 0; q < K; ++q) store_v<V>(vsh + q * C + c0, v[q]);  // exact: bf16 values
    }
#pragma unroll
    for (int q = 0; q < K; ++q)
#pragma unroll
      for (int e = 0; e < V; ++e) d[q][e] = 0.f;
#pragma unroll
    for (int j = 0; j < MK; ++j) {
      if (j >= k) continue;
      float a[V];
      load_v<V>(dX_new + tok * D + static_cast<long>(idx[j]) * C + c0, a);
#pragma unroll
      for (int e = 0; e < V; ++e) {
#pragma unroll
        for (int q = 0; q < K; ++q) {
          acc[j * K + q] += v[q][e] * a[e];
          d[q][e] += p[j] * hp[j * K + q] * a[e];
        }
#pragma unroll
        for (int jj = 0; jj < MK; ++jj) acc[MK * K + j * MK + jj] += a[e] * xa[jj][e];
      }
    }
    if (K == 1) {
      store_v<V>(d_out + tok * C + c0, d[0]);
    } else {
#pragma unroll
      for (int q = 0; q < K; ++q)
#pragma unroll
        for (int e = 0; e < V; ++e) dyn[q * C + c0 + e] = d[q][e];
    }
  }
  block_sum_many<NA, kWarps>(acc, wred, dots, NA);
  // The map gradients from the dots, spread over the first warp (one thread doing them in
  // turn kept the other 255 waiting at the next barrier).
  if (threadIdx.x < 32) {
    const int lane = threadIdx.x;
    float* dz = c.dz_map + tok * Q;
    for (int e = lane; e < k * K; e += 32) {
      const int j = e / K;
      const float h = hp[e];
      dz[kk + e] = p[j] * dots[e] * h * (1.f - 0.5f * h);  // H = 2 sigmoid(z)
    }
    // d loss / d Hres, which the Sinkhorn backward turns into d loss / d z in place.
    for (int e = lane; e < kk; e += 32) dz[e] = dots[MK * K + (e / k) * MK + e % k];
    // d loss / d z_router: p_j = s_idx_j = sigmoid(z_router) for the routed slots j >= m;
    // the active streams are distinct, so each stream gets at most one term.
    if (lane < N) {
      float g = 0.f;
      if (s.has_router) {
        for (int j = s.m; j < k; ++j) {
          if (idx[j] != lane) continue;
          float dp = 0.f;
          for (int q = 0; q < K; ++q) dp += hp[j * K + q] * dots[j * K + q];
          const float si = c.s[tok * N + lane];
          g += dp * si * (1.f - si);
        }
      }
      c.dz_proj[tok * 2 * N + lane] = g;
    }
  }
  if (K == 1) return;
  __syncthreads();
  // Gram-Schmidt backward: dyn[j*C..] holds dv_j and becomes dg_j. g before subtracting its
  // v_i component is v_j + sum_{i' = i}^{j-1} coef_{j,i'} v_i' (rebuilt, not stored).
  // v_i from shared memory (stored by this thread for its own channels in the first pass:
  // every loop below walks the same V-channel groups per thread), and the token's
  // coefficients and norms staged once.
  __shared__ float gs[(kMaxK - 1) * kMaxK];
  if (threadIdx.x < r * r + r) gs[threadIdx.x] = c.gs[tok * (r * r + r) + threadIdx.x];
  __syncthreads();
  for (int j = r; j >= 1; --j) {
    if (s.gram_schmidt) {
      for (int i = j - 1; i >= 0; --i) {
        const float coef = gs[(j - 1) * r + i], S = gs[r * r + i];
        float a = 0.f;
        for (int c0 = threadIdx.x * V; c0 < C; c0 += kThreads * V) {
          float vi[V];
          load_v<V>(vsh + i * C + c0, vi);
#pragma unroll
          for (int e = 0; e < V; ++e) a += dyn[j * C + c0 + e] * vi[e];
        }
        a = block_sum(a, red);
        for (int c0 = threadIdx.x * V; c0 < C; c0 += kThreads * V) {
          float gb[V], vi[V], w[V];
          load_v<V>(vsh + j * C + c0, gb);
          for (int i2 = i; i2 < j; ++i2) {
            load_v<V>(vsh + i2 * C + c0, w);
            const float cf = gs[(j - 1) * r + i2];
#pragma unroll
            for (int e = 0; e < V; ++e) gb[e] += cf * w[e];
          }
          load_v<V>(vsh + i * C + c0, vi);
#pragma unroll
          for (int e = 0; e < V; ++e) {
            const float cur = dyn[j * C + c0 + e];
            dyn[i * C + c0 + e] += -coef * cur - a * (gb[e] / S - 2.f * coef * vi[e] / S);
            dyn[j * C + c0 + e] = cur - a * vi[e] / S;
          }
        }
      }
    }
    // Each thread reads back only the channels it wrote (no barrier needed before these).
    for (int c0 = threadIdx.x * V; c0 < C; c0 += kThreads * V) {
#pragma unroll
      for (int e = 0; e < V; ++e) c.dg[(tok * r + j - 1) * C + c0 + e] = dyn[j * C + c0 + e];
    }
  }
  for (int c0 = threadIdx.x * V; c0 < C; c0 += kThreads * V) {
#pragma unroll
    for (int e = 0; e < V; ++e) c.dout_f[tok * C + c0 + e] = dyn[c0 + e];
  }
}

// One thread per token: dz_map[0, kk) holds d loss / d Hres on entry and d loss / d z_res on
// exit. The Sinkhorn iterations are recomputed into this thread's slice of shared memory
// ((2 iters + 1) k k floats; spec 4.2: recompute, not store). Kept out of the per-token
// block of post_backward_kernel, where one thread ran it while the other 255 waited.
__global__ void sinkhorn_backward_kernel(XhcShape s, XhcDevParams P, XhcDevCache c) {
  extern __shared__ float hist_all[];
  const long tok = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (tok >= s.tokens()) return;
  const int k = s.k, kk = k * k, Q = s.Q();
  float* hist = hist_all + threadIdx.x * (2 * s.sinkhorn_iters + 1) * kk;
  float z[kMaxActive * kMaxActive], dh[kMaxActive * kMaxActive], dz[kMaxActive * kMaxActive];
  const float ra = c.stats[tok * 4 + 3];
  float* dzm = c.dz_map + tok * Q;
  for (int q = 0; q < kk; ++q) {
    z[q] = P.res_alpha[0] * ra * c.map_raw[tok * Q + q] + P.res_bias[q];
    dh[q] = dzm[q];
  }
  sinkhorn_backward(k, s.sinkhorn_iters, z, dh, dz, hist);
  for (int q = 0; q < kk; ++q) dzm[q] = dz[q];
}

// k <= 4: the same backward with 16 lanes per token, lane l owning entry (l / 4, l % 4) of
// the 4 x 4 matrix (entries outside k x k hold 0 and drop out of every sum). A row or column
// sum is two shuffles among the lanes sharing it, so a token's 2 iters normalisation steps
// cost a few instructions each instead of a serial k x k loop, and 16 x more threads run.
// Each lane's history lives in shared memory at an odd stride (no bank conflicts).
__global__ void sinkhorn_backward16_kernel(XhcShape s, XhcDevParams P, XhcDevCache c, int stride) {
  extern __shared__ float hist_all[];
  const long tok = (blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x) >> 4;
  const int l = threadIdx.x & 15, row = l >> 2, col = l & 3;
  const int k = s.k, Q = s.Q(), steps = 2 * s.sinkhorn_iters;
  const bool on = tok < s.tokens() && row < k && col < k;
  const int q = row * k + col;
  float* hist = hist_all + threadIdx.x * stride;
  const float z =
      on ? P.res_alpha[0] * c.stats[tok * 4 + 3] * c.map_raw[tok * Q + q] + P.res_bias[q]
         : -INFINITY;
  // The max and, among equal maxima, the lowest index (as the serial argmax picks).
  float zmax = z;
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) zmax = fmaxf(zmax, __shfl_xor_sync(0xffffffffu, zmax, o));
  int amax = on && z == zmax ? q : 1 << 30;
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) amax = min(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  float x = on ? expf(z - zmax) : 0.f;
  hist[0] = x;
  // Step s normalises columns when s is even (sum over rows: lanes 4 apart), rows when odd.
  for (int st = 0; st < steps; ++st) {
    const int o1 = st % 2 == 0 ? 4 : 1, o2 = 2 * o1;
    float sum = x + __shfl_xor_sync(0xffffffffu, x, o1);
    sum += __shfl_xor_sync(0xffffffffu, sum, o2);
    x *= 1.f / (sum + 1e-6f);
    hist[st + 1] = x;
  }
  float grad = on ? c.dz_map[tok * Q + q] : 0.f;
  for (int st = steps - 1; st >= 0; --st) {
    const int o1 = st % 2 == 0 ? 4 : 1, o2 = 2 * o1;
    const float xs = hist[st], gy = grad * hist[st + 1];
    float sum = xs + __shfl_xor_sync(0xffffffffu, xs, o1);
    sum += __shfl_xor_sync(0xffffffffu, sum, o2);
    float dot = gy + __shfl_xor_sync(0xffffffffu, gy, o1);
    dot += __shfl_xor_sync(0xffffffffu, dot, o2);
    grad = (grad - dot) * (1.f / (sum + 1e-6f));
  }
  float dz = on ? grad * hist[0] : 0.f, total = dz;
#pragma unroll
  for (int o = 1; o < 16; o <<= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
  if (q == amax) dz -= total;  // the max is a function of z too
  if (on) c.dz_map[tok * Q + q] = dz;
}

// The causal convolutions' backward with each thread walking kConvChunk tokens of one
// channel of one sequence, the taps it needs held in registers (a sliding window), so every
// dg / out value is read once per branch instead of once per tap. kMaxTap (16) bounds the
// widest kernel (XhcCheckShape).

// d_out[t] = direct part + sum_j sum_tau w_j[tau] dg_j[t + tau] (same sequence only). The
// walk runs backwards from the chunk's end plus the widest tap, so the window win[j][tau] =
// dg_j[t + tau] is full when the chunk's first output is due.
__global__ void conv_input_grad_kernel(XhcShape s, XhcDevParams P, XhcDevCache c,
                                       bf16_t* __restrict__ d_out) {
  const int C = s.C, r = s.r, T = s.T, ch = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunks = (T + kConvChunk - 1) / kConvChunk;
  const int b = blockIdx.y / chunks, t0 = (blockIdx.y % chunks) * kConvChunk;
  if (ch >= C) return;
  const int t1 = min(T, t0 + kConvChunk);
  float w[kMaxK - 1][kMaxTap], win[kMaxK - 1][kMaxTap];
  int widest = 0;
#pragma unroll
  for (int j = 0; j < kMaxK - 1; ++j) {
    const int kj = j < r ? s.kernels[j] : 0;
    widest = max(widest, kj);
#pragma unroll
    for (int tau = 0; tau < kMaxTap; ++tau) {
      w[j][tau] = tau < kj ? P.conv_weight[j][static_cast<long>(tau) * C + ch] : 0.f;
      win[j][tau] = 0.f;
    }
  }
  const long base = static_cast<long>(b) * T;
  // The loads of the next two tokens are issued before this token's arithmetic (a walk is
  // one dependent chain per thread; without the look-ahead each token waited on its loads).
  float ga[kMaxK - 1] = {}, gb[kMaxK - 1] = {}, da = 0.f, db = 0.f;
  auto fetch = [&](int tt, float* g, float& d) {
    if (tt < t0) return;
    const long tok = base + tt;
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) g[j] = j < r ? c.dg[(tok * r + j) * C + ch] : 0.f;
    d = tt < t1 ? c.dout_f[tok * C + ch] : 0.f;
  };
  const int start = min(T - 1, t1 - 1 + widest - 1);
  fetch(start, ga, da);
  fetch(start - 1, gb, db);
  for (int t = start; t >= t0; --t) {
    const long tok = base + t;
    float cur[kMaxK - 1];
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) cur[j] = ga[j], ga[j] = gb[j];
    const float dcur = da;
    da = db;
    fetch(t - 2, gb, db);
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) {
      if (j >= r) continue;
#pragma unroll
      for (int tau = kMaxTap - 1; tau > 0; --tau) win[j][tau] = win[j][tau - 1];
      win[j][0] = cur[j];
#pragma unroll
      for (int tau = 0; tau < kMaxTap; ++tau) acc += w[j][tau] * win[j][tau];
    }
    if (t < t1) st(d_out + tok * C + ch, dcur + acc);
  }
}

template <int MK, int K>
int LaunchPostBackward(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                       const bf16_t* out, const bf16_t* dX_new, XhcDevCache* c, bf16_t* d_out,
                       cudaStream_t st) {
  const size_t smem = K > 1 ? (sizeof(float) + sizeof(bf16_t)) * K * s.C : sizeof(float);
  // 4 channels a step where the rows allow it (C % 4 == 0), else 1; held to 3 blocks per SM
  // (80 registers, a few spilled): the backward-out launch took 1.75 ms at the bench shape,
  // against 2.01-2.02 unbounded (107 registers, 2 blocks) and 2.06-2.07 one channel a step
  // (docs/design/cuda-kernels.md).
  auto kernel =
      s.C % 4 == 0 ? post_backward_kernel<MK, K, 4, 3> : post_backward_kernel<MK, K, 1, 1>;
  XHC_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  kernel<<<s.tokens(), kThreads, smem, st>>>(s, P, X_in, out, dX_new, *c, d_out);
  XHC_LAUNCH_CHECK();
  return 0;
}

template <int MK>
int DispatchPostBackward(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                         const bf16_t* out, const bf16_t* dX_new, XhcDevCache* c, bf16_t* d_out,
                         cudaStream_t st) {
  switch (s.K) {
    case 1: return LaunchPostBackward<MK, 1>(s, P, X_in, out, dX_new, c, d_out, st);
    case 2: return LaunchPostBackward<MK, 2>(s, P, X_in, out, dX_new, c, d_out, st);
    case 3: return LaunchPostBackward<MK, 3>(s, P, X_in, out, dX_new, c, d_out, st);
    case 4: return LaunchPostBackward<MK, 4>(s, P, X_in, out, dX_new, c, d_out, st);
    default: return kXhcErrInvalidArgument;
  }
}

// k > 4: one thread per token, as many per block as have room for their histories.
int LaunchSinkhornBackward(const XhcShape& s, const XhcDevParams& P, XhcDevCache* c,
                           cudaStream_t st) {
  const size_t hist = sizeof(float) * (2 * s.sinkhorn_iters + 1) * s.k * s.k;
  const int threads =
      static_cast<int>(std::max<size_t>(1, std::min<size_t>(64, (96 << 10) / hist)));
  XHC_CUDA_TRY(cudaFuncSetAttribute(sinkhorn_backward_kernel,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(threads * hist)));
  sinkhorn_backward_kernel<<<ceil_div(s.tokens(), threads), threads, threads * hist, st>>>(s, P,
                                                                                           *c);
  XHC_LAUNCH_CHECK();
  return 0;
}

}  // namespace

int XhcBackwardOutLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                         const bf16_t* out, const bf16_t* dX_new, XhcDevCache* c, bf16_t* d_out,
                         void* stream) {
  XHC_TRY(XhcCheckShape(s));
  cudaStream_t st = as_stream(stream);
  XHC_TRY(s.k <= 4 ? DispatchPostBackward<4>(s, P, X_in, out, dX_new, c, d_out, st)
                   : DispatchPostBackward<8>(s, P, X_in, out, dX_new, c, d_out, st));
  if (s.k <= 4) {
    const int stride = (2 * s.sinkhorn_iters + 1) | 1;  // odd: each lane its own bank
    const size_t smem = sizeof(float) * stride * 256;
    XHC_CUDA_TRY(cudaFuncSetAttribute(sinkhorn_backward16_kernel,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
    sinkhorn_backward16_kernel<<<ceil_div(s.tokens() * 16, 256), 256, smem, st>>>(s, P, *c, stride);
    XHC_LAUNCH_CHECK();
  } else {
    XHC_TRY(LaunchSinkhornBackward(s, P, c, st));
  }
  if (s.K > 1) {
    const dim3 grid(ceil_div(s.C, 128), s.B * ceil_div(s.T, kConvChunk));
    conv_input_grad_kernel<<<grid, 128, 0, st>>>(s, P, *c, d_out);
    XHC_LAUNCH_CHECK();
  }
  return 0;
}

}  // namespace xhc::cuda
