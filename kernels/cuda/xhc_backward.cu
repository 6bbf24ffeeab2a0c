// Backward kernels of the xHC sublayer, split like the CPU path (xhc_ops.h) into input
// gradient (I.1 XhcBackwardOut, I.2 XhcBackwardInput) and weight gradient (W) launches.
//   post_backward_kernel   per token: gathers the active gradients dA_j = dX_new[idx_j],
//                          all dot products of the post map / mixing / routing weight in one
//                          pass, d aug, then the Gram-Schmidt backward with the history
//                          rebuilt from the stored coefficients (nothing (r,r,C) is ever
//                          stored).
//   sinkhorn_backward16_kernel  the Sinkhorn backward, recomputing the iterations on chip:
//                          16 lanes per token for k <= 4 (sinkhorn_backward_kernel, one
//                          thread per token, for larger k).
//   conv_input_grad_kernel all r convolution branches' input gradients in one pass.
//   input_stats_kernel     per token: read-map gradients (N dots with du) and the scalar
//                          normalisation corrections, which follow from the cached raw
//                          projections (sum(g*y) = alpha sum_i dz_i rstd proj_i) so no
//                          reduction over the N*C state is needed for them.
//   input_apply_kernel     dX_in for 16 tokens x 32 channels per block: pass-through, dense
//                          read, RMS / LayerNorm backward through the projections (weights
//                          staged in shared memory once per 16 tokens), active mixing and
//                          active RMS backward, all accumulated straight into the full-state
//                          gradient (no separate k*C active gradient + scatter-add).
//   weights                the two big projections as cuBLAS bf16 GEMMs with float32
//                          accumulation into the float32 gradients; biases, alphas and the
//                          LayerNorm mean correction as deterministic token reductions.

#include <cublas_v2.h>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <int MK, int K>
__global__ void __launch_bounds__(kThreads)
    post_backward_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X_in,
                         const bf16_t* __restrict__ out, const bf16_t* __restrict__ dX_new,
                         XhcDevCache c, bf16_t* __restrict__ d_out) {
  constexpr int NA = MK * K + MK * MK;  // dot(aug_q, dA_j), then dot(dA_j, Xa_j')
  extern __shared__ float dyn[];        // daug (K, C), then v_0..v_r (K, C), when K > 1
  __shared__ float hp[MK * K], hr[MK * MK], p[MK], dots[NA], wred[kWarps][NA], red[32];
  __shared__ int idx[MK];
  const long tok = blockIdx.x;
  const int k = s.k, C = s.C, N = s.N, r = s.r, kk = k * k, Q = s.Q();
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
  for (int ch = threadIdx.x; ch < C; ch += kThreads) {
    float a[MK], xa[MK], v[K];
#pragma unroll
    for (int j = 0; j < MK; ++j) {
      a[j] = j < k ? ld(dX_new + tok * D + static_cast<long>(idx[j]) * C + ch) : 0.f;
      xa[j] = j < k ? ld(X_in + tok * D + static_cast<long>(idx[j]) * C + ch) : 0.f;
    }
    v[0] = ld(out + tok * C + ch);
#pragma unroll
    for (int q = 1; q < K; ++q) v[q] = ld(c.aug + (tok * r + q - 1) * C + ch);
    if (K > 1) {
#pragma unroll
      for (int q = 0; q < K; ++q) dyn[(K + q) * C + ch] = v[q];  // for the GS backward
    }
#pragma unroll
    for (int j = 0; j < MK; ++j) {
#pragma unroll
      for (int q = 0; q < K; ++q) acc[j * K + q] += v[q] * a[j];
#pragma unroll
      for (int jj = 0; jj < MK; ++jj) acc[MK * K + j * MK + jj] += a[j] * xa[jj];
    }
#pragma unroll
    for (int q = 0; q < K; ++q) {
      float d = 0.f;
#pragma unroll
      for (int j = 0; j < MK; ++j) if (j < k) d += p[j] * hp[j * K + q] * a[j];
      if (K == 1) {
        st(d_out + tok * C + ch, d);
      } else {
        dyn[q * C + ch] = d;
      }
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int q = 0; q < NA; ++q) {
    const float t = warp_sum(acc[q]);
    if (lane == 0) wred[warp][q] = t;
  }
  __syncthreads();
  if (threadIdx.x < NA) {
    float t = 0.f;
    for (int w = 0; w < kWarps; ++w) t += wred[w][threadIdx.x];
    dots[threadIdx.x] = t;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float* dz = c.dz_map + tok * Q;
    float dp[MK];
    for (int j = 0; j < k; ++j) {
      dp[j] = 0.f;
      for (int q = 0; q < K; ++q) {
        const float dot = dots[j * K + q], h = hp[j * K + q];
        dp[j] += h * dot;
        dz[kk + j * K + q] = p[j] * dot * h * (1.f - 0.5f * h);  // H = 2 sigmoid(z)
      }
      // d loss / d Hres, which sinkhorn_backward_kernel turns into d loss / d z in place.
      for (int jj = 0; jj < k; ++jj) dz[j * k + jj] = dots[MK * K + j * MK + jj];
    }
    float* dzp = c.dz_proj + tok * 2 * N;
    for (int i = 0; i < N; ++i) dzp[i] = 0.f;
    if (s.has_router) {
      for (int j = s.m; j < k; ++j) {  // p_j = s_idx_j = sigmoid(z_router)
        const float si = c.s[tok * N + idx[j]];
        dzp[idx[j]] += dp[j] * si * (1.f - si);
      }
    }
  }
  if (K == 1) return;
  __syncthreads();
  // Gram-Schmidt backward: dyn[j*C..] holds dv_j and becomes dg_j. g before subtracting its
  // v_i component is v_j + sum_{i' = i}^{j-1} coef_{j,i'} v_i' (rebuilt, not stored).
  // v_i from shared memory (stored by this thread for its own channels in the first pass),
  // and the token's coefficients and norms staged once.
  __shared__ float gs[(kMaxK - 1) * kMaxK];
  if (threadIdx.x < r * r + r) gs[threadIdx.x] = c.gs[tok * (r * r + r) + threadIdx.x];
  __syncthreads();
  const float* vs = dyn + K * C;
  auto vload = [&](int i, int ch) { return vs[i * C + ch]; };
  for (int j = r; j >= 1; --j) {
    if (s.gram_schmidt) {
      for (int i = j - 1; i >= 0; --i) {
        const float coef = gs[(j - 1) * r + i], S = gs[r * r + i];
        float a = 0.f;
        for (int ch = threadIdx.x; ch < C; ch += kThreads) a += dyn[j * C + ch] * vload(i, ch);
        a = block_sum(a, red);
        for (int ch = threadIdx.x; ch < C; ch += kThreads) {
          float gb = vload(j, ch);
          for (int i2 = i; i2 < j; ++i2) gb += gs[(j - 1) * r + i2] * vload(i2, ch);
          const float vi = vload(i, ch), cur = dyn[j * C + ch];
          dyn[i * C + ch] += -coef * cur - a * (gb / S - 2.f * coef * vi / S);
          dyn[j * C + ch] = cur - a * vi / S;
        }
      }
    }
    for (int ch = threadIdx.x; ch < C; ch += kThreads) {
      c.dg[(tok * r + j - 1) * C + ch] = dyn[j * C + ch];
    }
  }
  for (int ch = threadIdx.x; ch < C; ch += kThreads) c.dout_f[tok * C + ch] = dyn[ch];
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
__global__ void sinkhorn_backward16_kernel(XhcShape s, XhcDevParams P, XhcDevCache c,
                                           int stride) {
  extern __shared__ float hist_all[];
  const long tok = (blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x) >> 4;
  const int l = threadIdx.x & 15, row = l >> 2, col = l & 3;
  const int k = s.k, Q = s.Q(), steps = 2 * s.sinkhorn_iters;
  const bool on = tok < s.tokens() && row < k && col < k;
  const int q = row * k + col;
  float* hist = hist_all + threadIdx.x * stride;
  const float z = on ? P.res_alpha[0] * c.stats[tok * 4 + 3] * c.map_raw[tok * Q + q] +
                           P.res_bias[q]
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

// Per chunk: part[chunk][tap][ch] = sum_{t in chunk, t >= tau} dg_j[t][ch] out[t - tau][ch]
// (tap = offset of j's taps + tau); the window ow[tau] = out[t - tau] is filled by walking
// from widest - 1 tokens before the chunk. conv_weight_reduce_kernel adds the chunks in order.
__global__ void conv_weight_part_kernel(XhcShape s, const bf16_t* __restrict__ out,
                                        XhcDevCache c, int taps) {
  const int C = s.C, r = s.r, T = s.T, ch = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunks = (T + kConvChunk - 1) / kConvChunk;
  const int b = blockIdx.y / chunks, t0 = (blockIdx.y % chunks) * kConvChunk;
  if (ch >= C) return;
  const int t1 = min(T, t0 + kConvChunk);
  int widest = 0, kj[kMaxK - 1];
#pragma unroll
  for (int j = 0; j < kMaxK - 1; ++j) {
    kj[j] = j < r ? s.kernels[j] : 0;
    widest = max(widest, kj[j]);
  }
  float acc[kMaxK - 1][kMaxTap], ow[kMaxTap];
#pragma unroll
  for (int tau = 0; tau < kMaxTap; ++tau) {
    ow[tau] = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) acc[j][tau] = 0.f;
  }
  const long base = static_cast<long>(b) * T;
  // Two tokens of look-ahead on the loads, as in conv_input_grad_kernel.
  float oa = 0.f, ob = 0.f, ga[kMaxK - 1] = {}, gb[kMaxK - 1] = {};
  auto fetch = [&](int tt, float& o, float* g) {
    if (tt >= t1) return;
    const long tok = base + tt;
    o = ld(out + tok * C + ch);
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) g[j] = j < r && tt >= t0 ? c.dg[(tok * r + j) * C + ch] : 0.f;
  };
  const int start = max(0, t0 - (widest - 1));
  fetch(start, oa, ga);
  fetch(start + 1, ob, gb);
  for (int t = start; t < t1; ++t) {
    float cur[kMaxK - 1];
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) cur[j] = ga[j], ga[j] = gb[j];
#pragma unroll
    for (int tau = kMaxTap - 1; tau > 0; --tau) ow[tau] = ow[tau - 1];
    ow[0] = oa;
    oa = ob;
    fetch(t + 2, ob, gb);
    if (t < t0) continue;
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) {
      if (j >= r) continue;
#pragma unroll
      for (int tau = 0; tau < kMaxTap; ++tau) acc[j][tau] += cur[j] * ow[tau];  // ow = 0 before t = 0
    }
  }
  float* part = c.conv_part + static_cast<long>(blockIdx.y) * taps * C;
  int off = 0;
#pragma unroll
  for (int j = 0; j < kMaxK - 1; ++j) {
#pragma unroll
    for (int tau = 0; tau < kMaxTap; ++tau) {
      if (tau < kj[j]) part[static_cast<long>(off + tau) * C + ch] = acc[j][tau];
    }
    off += kj[j];
  }
}

// conv.j.weight[tau][ch] += sum over chunks, in chunk order (deterministic).
__global__ void conv_weight_reduce_kernel(XhcShape s, XhcDevCache c, XhcDevGrads G, int taps,
                                          int parts) {
  const long e = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  const int C = s.C;
  if (e >= static_cast<long>(taps) * C) return;
  float a = 0.f;
  for (int q = 0; q < parts; ++q) a += c.conv_part[static_cast<long>(q) * taps * C + e];
  int tap = static_cast<int>(e / C), j = 0;
  while (tap >= s.kernels[j]) tap -= s.kernels[j++];
  G.conv_weight[j][static_cast<long>(tap) * C + e % C] += a;
}

// V = 8: 16-byte loads (C % 8 == 0), every stream's load of a channel group in flight at once.
template <int V>
__global__ void __launch_bounds__(kThreads)
    input_stats_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X_in,
                       const bf16_t* __restrict__ du, XhcDevCache c) {
  __shared__ float wred[kWarps][kMaxStreams], dots[kMaxStreams];
  const long tok = blockIdx.x;
  const int N = s.N, C = s.C, D = s.D(), k = s.k, kk = k * k, Q = s.Q();
  float acc[kMaxStreams];
#pragma unroll
  for (int i = 0; i < kMaxStreams; ++i) acc[i] = 0.f;
  for (int ch = threadIdx.x * V; ch < C; ch += kThreads * V) {
    float g[V];
    load_v<V>(du + tok * C + ch, g);
#pragma unroll
    for (int i = 0; i < kMaxStreams; ++i) {
      if (i >= N) continue;
      float x[V];
      load_v<V>(X_in + tok * D + static_cast<long>(i) * C + ch, x);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[i] += g[e] * x[e];
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int i = 0; i < kMaxStreams; ++i) {
    const float t = warp_sum(acc[i]);
    if (lane == 0) wred[warp][i] = t;
  }
  __syncthreads();
  if (threadIdx.x < N) {
    float t = 0.f;
    for (int w = 0; w < kWarps; ++w) t += wred[w][threadIdx.x];
    dots[threadIdx.x] = t;
  }
  __syncthreads();
  // The corrections, by the first warp: lane i takes stream i (N <= 32) and every 32nd map
  // row, then four warp sums (one thread doing it serially was a tail after the loads).
  if (threadIdx.x >= 32) return;  // lane below is then the thread index
  const float* st4 = c.stats + tok * 4;
  const float mean = st4[0], rstd_ln = st4[1], rstd = st4[2], ra = st4[3];
  float* dz = c.dz_proj + tok * 2 * N;
  float s1 = 0.f, s2 = 0.f, s3 = 0.f, s4 = 0.f;
  if (lane < N) {
    const int i = lane;
    const float h = c.hpre[tok * N + i];
    const float dzp = dots[i] * h * (1.f - h);
    dz[N + i] = dzp;
    s1 = P.pre_alpha[0] * dzp * rstd * c.proj[tok * 2 * N + N + i];
    if (s.has_router) {
      s2 = dz[i] * c.wsum[i];
      s3 = dz[i] * rstd_ln * (c.proj[tok * 2 * N + i] - mean * c.wsum[i]);
    }
  }
  for (int q = lane; q < Q; q += 32) {
    const float alpha = q < kk ? P.res_alpha[0] : P.post_alpha[0];
    s4 += alpha * c.dz_map[tok * Q + q] * ra * c.map_raw[tok * Q + q];
  }
  s1 = warp_sum(s1), s2 = warp_sum(s2), s3 = warp_sum(s3), s4 = warp_sum(s4);
  if (lane != 0) return;
  float* corr = c.corr + tok * 4;
  corr[0] = s1 / D, corr[1] = s2 / D, corr[2] = s3 / D, corr[3] = s4 / s.Da();
}

constexpr int kTM = 16, kTC = 32;  // input_apply tile: 16 tokens x 32 channels

__global__ void __launch_bounds__(kThreads)
    input_apply_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X_in,
                       const bf16_t* __restrict__ du, bf16_t* dX, XhcDevCache c) {
  __shared__ float dzs[kTM][2 * kMaxStreams], hpre[kTM][kMaxStreams];
  __shared__ float hres[kTM][kMaxActive * kMaxActive], st4[kTM][4], corr[kTM][4];
  __shared__ float dA[kTM][kMaxActive][kTC], dus[kTM][kTC];
  __shared__ float wr[kMaxStreams][kTC], wp[kMaxStreams][kTC];
  __shared__ int idx[kTM][kMaxActive];
  const long n = s.tokens(), tok0 = static_cast<long>(blockIdx.x) * kTM;
  const int N = s.N, C = s.C, k = s.k, kk = k * k, Q = s.Q(), D = s.D(), Da = s.Da();
  const int c0 = blockIdx.y * kTC;
  for (int e = threadIdx.x; e < kTM * 2 * N; e += kThreads) {
    const int tm = e / (2 * N), q = e % (2 * N);
    dzs[tm][q] = tok0 + tm < n ? c.dz_proj[(tok0 + tm) * 2 * N + q] : 0.f;
  }
  for (int e = threadIdx.x; e < kTM * N; e += kThreads) {
    const int tm = e / N;
    hpre[tm][e % N] = tok0 + tm < n ? c.hpre[(tok0 + tm) * N + e % N] : 0.f;
  }
  for (int e = threadIdx.x; e < kTM * kk; e += kThreads) {
    const int tm = e / kk;
    hres[tm][e % kk] = tok0 + tm < n ? c.hres[(tok0 + tm) * kk + e % kk] : 0.f;
  }
  for (int e = threadIdx.x; e < kTM * 4; e += kThreads) {
    const int tm = e / 4;
    st4[tm][e % 4] = tok0 + tm < n ? c.stats[(tok0 + tm) * 4 + e % 4] : 0.f;
    corr[tm][e % 4] = tok0 + tm < n ? c.corr[(tok0 + tm) * 4 + e % 4] : 0.f;
  }
  for (int e = threadIdx.x; e < kTM * k; e += kThreads) {
    const int tm = e / k;
    idx[tm][e % k] = tok0 + tm < n ? c.idx[(tok0 + tm) * k + e % k] : 0;
  }
  __syncthreads();
  // dA is read from dX before any thread of this block overwrites it (in place).
  for (int e = threadIdx.x; e < kTM * k * kTC; e += kThreads) {
    const int tm = e / (k * kTC), j = (e / kTC) % k, cc = e % kTC;
    const long tok = tok0 + tm;
    const bool ok = tok < n && c0 + cc < C;
    dA[tm][j][cc] = ok ? ld(dX + tok * D + static_cast<long>(idx[tm][j]) * C + c0 + cc) : 0.f;
    if (j == 0) dus[tm][cc] = ok ? ld(du + tok * C + c0 + cc) : 0.f;
  }
  __syncthreads();
  const int cc = threadIdx.x % kTC, tmb = threadIdx.x / kTC;  // 8 token rows per pass
  const int ch = c0 + cc;
  for (int i = 0; i < N; ++i) {
    __syncthreads();  // previous stream's weights no longer in use
    for (int e = threadIdx.x; e < N * kTC; e += kThreads) {
      const int row = e / kTC, q = e % kTC;
      const long col = static_cast<long>(i) * C + c0 + q;
      const bool ok = c0 + q < C;
      wp[row][q] = ok ? P.pre_weight[row * static_cast<long>(D) + col] : 0.f;
      wr[row][q] = (ok && s.has_router) ? P.router_weight[row * static_cast<long>(D) + col] : 0.f;
    }
    __syncthreads();
    if (ch >= C) continue;
    for (int tm = tmb; tm < kTM; tm += kThreads / kTC) {
      const long tok = tok0 + tm;
      if (tok >= n) break;
      const long e = tok * D + static_cast<long>(i) * C + ch;
      const float x = ld(X_in + e);
      float gy = 0.f, gln = 0.f;
      for (int row = 0; row < N; ++row) {
        gy += dzs[tm][N + row] * wp[row][cc];
        gln += dzs[tm][row] * wr[row][cc];
      }
      gy *= P.pre_alpha[0];
      const float rstd = st4[tm][2];
      float d = hpre[tm][i] * dus[tm][cc] + rstd * (gy - x * rstd * corr[tm][0]);
      if (s.has_router) {
        const float ln = (x - st4[tm][0]) * st4[tm][1];
        d += st4[tm][1] * (gln - corr[tm][1] - ln * corr[tm][2]);
      }
      int slot = -1;
      for (int j = 0; j < k; ++j) if (idx[tm][j] == i) slot = j;
      if (slot < 0) {
        d += ld(dX + e);  // untouched stream: its gradient passes through
      } else {
        float mix = 0.f, gxa = 0.f;
        for (int j = 0; j < k; ++j) mix += hres[tm][j * k + slot] * dA[tm][j][cc];
        const float* dzm = c.dz_map + tok * Q;
        const long col = static_cast<long>(slot) * C + ch;
        for (int q = 0; q < kk; ++q) gxa += dzm[q] * P.res_weight[q * static_cast<long>(Da) + col];
        gxa *= P.res_alpha[0];
        float gp = 0.f;
        for (int q = kk; q < Q; ++q) gp += dzm[q] * P.post_weight[(q - kk) * static_cast<long>(Da) + col];
        gxa += P.post_alpha[0] * gp;
        const float ra = st4[tm][3];
        d += mix + ra * (gxa - x * ra * corr[tm][3]);
      }
      st(dX + e, d);
    }
  }
}

// The input gradient for k <= 4 in two register-tiled passes (64 tokens x 64 channels per
// block, 4 x 4 per thread, so each shared-memory load feeds 4 to 16 FMAs):
//   input_active_kernel  dX[tok, idx_j, ch] <- sum_j' hres[j'][j] dA_j'[ch]
//                          + ra (gxa_j[ch] - xa_j[ch] ra corr3),
//                        gxa_j = alpha_res sum_{q<kk} dzm_q Wres[q][jC + ch]
//                          + alpha_post sum_{q>=kk} dzm_q Wpost[q-kk][jC + ch],
//                        with dA = dX[tok, idx] as it arrives. Each thread owns all k slots
//                        of its (token, channel), so reading dA and writing in place is safe.
//   input_dense_kernel   then, for every stream i: dX[tok, i, ch] += hpre_i du[ch]
//                          + rstd (alpha_pre sum_r dzp_r Wpre[r][iC + ch] - x rstd corr0)
//                          + rstd_ln (sum_r dzr_r Wrouter[r][iC + ch] - corr1 - ln(x) corr2):
//                        the pass-through of untouched streams and the active result of the
//                        first pass both sit in dX already.
constexpr int kTileT = 64, kTileC = 64, kTileQ = 16;

// 4 consecutive channels of one row as floats; 8-byte access when `vec` (C % 4 == 0 and the
// whole group inside the row), else element by element with the bound check.
__device__ __forceinline__ void load4(const bf16_t* p, bool vec, int valid, float* v) {
  if (vec) {
    const uint2 raw = *reinterpret_cast<const uint2*>(p);
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
    const float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
  } else {
#pragma unroll
    for (int b = 0; b < 4; ++b) v[b] = b < valid ? ld(p + b) : 0.f;
  }
}
__device__ __forceinline__ void store4(bf16_t* p, bool vec, int valid, const float* v) {
  if (vec) {
    uint2 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
    h[0] = __floats2bfloat162_rn(v[0], v[1]);
    h[1] = __floats2bfloat162_rn(v[2], v[3]);
    *reinterpret_cast<uint2*>(p) = raw;
  } else {
#pragma unroll
    for (int b = 0; b < 4; ++b) if (b < valid) st(p + b, v[b]);
  }
}

__global__ void __launch_bounds__(kThreads, 2)
    input_active_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X_in,
                        bf16_t* dX, XhcDevCache c) {
  __shared__ __align__(16) float dzT[kTileQ][kTileT + 4];  // [row][token], alpha folded in
  __shared__ __align__(16) float wt[kTileQ][4][kTileC];  // [row][slot][channel]
  const int k = s.k, kk = k * k, Q = s.Q(), C = s.C, Da = s.Da();
  const long n = s.tokens(), D = s.D(), tok0 = static_cast<long>(blockIdx.y) * kTileT;
  const int c0 = blockIdx.x * kTileC;
  const float ar = P.res_alpha[0], ap = P.post_alpha[0];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  float g[4][4][4];  // [token a][slot j][channel b]
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int b = 0; b < 4; ++b) g[a][j][b] = 0.f;
  for (int q0 = 0; q0 < Q; q0 += kTileQ) {
    __syncthreads();  // the previous rows are no longer read
    for (int e = threadIdx.x; e < kTileQ * kTileT; e += kThreads) {  // rows fastest: coalesced
      const int t = e / kTileQ, qq = e % kTileQ, q = q0 + qq;
      const long tok = tok0 + t;
      dzT[qq][t] = (q < Q && tok < n) ? (q < kk ? ar : ap) * c.dz_map[tok * Q + q] : 0.f;
    }
    for (int e = threadIdx.x; e < kTileQ * 4 * kTileC; e += kThreads) {
      const int qq = e / (4 * kTileC), j = (e / kTileC) % 4, b = e % kTileC;
      const int q = q0 + qq, ch = c0 + b;
      float v = 0.f;
      if (q < Q && j < k && ch < C) {
        const long col = static_cast<long>(j) * C + ch;
        v = q < kk ? P.res_weight[q * static_cast<long>(Da) + col]
                   : P.post_weight[(q - kk) * static_cast<long>(Da) + col];
      }
      wt[qq][j][b] = v;
    }
    __syncthreads();
    const int rows = min(kTileQ, Q - q0);
    for (int qq = 0; qq < rows; ++qq) {
      const float4 d = *reinterpret_cast<const float4*>(&dzT[qq][4 * ty]);
      const float dv[4] = {d.x, d.y, d.z, d.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 w = *reinterpret_cast<const float4*>(&wt[qq][j][4 * tx]);
        const float wv[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int b = 0; b < 4; ++b) g[a][j][b] += dv[a] * wv[b];
      }
    }
  }
  const int ch = c0 + 4 * tx;
  if (ch >= C) return;
  const int valid = min(4, C - ch);
  const bool vec = (C % 4 == 0);
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const long tok = tok0 + 4 * ty + a;
    if (tok >= n) break;
    int idx[4];
    float hr[4][4], dA[4][4], xa[4][4];  // constant indices only: all in registers
#pragma unroll
    for (int j = 0; j < 4; ++j) idx[j] = j < k ? c.idx[tok * k + j] : 0;
#pragma unroll
    for (int jj = 0; jj < 4; ++jj)
#pragma unroll
      for (int j = 0; j < 4; ++j) hr[jj][j] = jj < k && j < k ? c.hres[tok * kk + jj * k + j] : 0.f;
    const float ra = c.stats[tok * 4 + 3], corr3 = c.corr[tok * 4 + 3];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j >= k) continue;
      const long e = tok * D + static_cast<long>(idx[j]) * C + ch;
      load4(dX + e, vec, valid, dA[j]);
      load4(X_in + e, vec, valid, xa[j]);
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j >= k) continue;
      float o[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        float mix = 0.f;
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) if (jj < k) mix += hr[jj][j] * dA[jj][b];
        o[b] = mix + ra * (g[a][j][b] - xa[j][b] * ra * corr3);
      }
      store4(dX + tok * D + static_cast<long>(idx[j]) * C + ch, vec, valid, o);
    }
  }
}

// RMAX >= 2N: the map rows the tiles are sized for (32 for N <= 16, else 64).
template <int RMAX>
__global__ void __launch_bounds__(kThreads, 2)
    input_dense_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X_in,
                       const bf16_t* __restrict__ du, bf16_t* dX, XhcDevCache c) {
  // [row][token], rows [0, N) router (zero without one), [N, 2N) read map scaled by
  // alpha_pre; padded by 4 so the transposing stores below hit 8 banks, not 1.
  __shared__ __align__(16) float dzT[RMAX][kTileT + 4];
  __shared__ __align__(16) float wt[RMAX][kTileC];  // [row][channel], stream i
  const int N = s.N, C = s.C, R = 2 * N;
  const long n = s.tokens(), D = s.D(), tok0 = static_cast<long>(blockIdx.y) * kTileT;
  const int c0 = blockIdx.x * kTileC;
  const float alpha = P.pre_alpha[0];
  for (int e = threadIdx.x; e < R * kTileT; e += kThreads) {  // row fastest: coalesced
    const int t = e / R, row = e % R;
    const long tok = tok0 + t;
    float v = 0.f;
    if (tok < n && (row >= N || s.has_router)) {
      v = c.dz_proj[tok * R + row] * (row >= N ? alpha : 1.f);
    }
    dzT[row][t] = v;
  }
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int ch = c0 + 4 * tx;
  const int valid = min(4, C - ch);
  const bool vec = (C % 4 == 0);
  // Stream i's weight tile (R x kTileC) is fetched into registers while stream i - 1
  // computes: RMAX / 4 values per thread.
  constexpr int kW = RMAX * kTileC / kThreads;
  float wnext[kW];
  auto fetch = [&](int i) {
#pragma unroll
    for (int u = 0; u < kW; ++u) {
      const int e = threadIdx.x + u * kThreads, row = e / kTileC, b = e % kTileC;
      const long col = static_cast<long>(i) * C + c0 + b;
      float v = 0.f;
      if (row < R && c0 + b < C) {
        if (row >= N) {
          v = P.pre_weight[(row - N) * D + col];
        } else if (s.has_router) {
          v = P.router_weight[row * D + col];
        }
      }
      wnext[u] = v;
    }
  };
  fetch(0);
  for (int i = 0; i < N; ++i) {
    __syncthreads();  // dzT written (first stream) / the previous stream's wt no longer read
#pragma unroll
    for (int u = 0; u < kW; ++u) {
      const int e = threadIdx.x + u * kThreads;
      if (e < R * kTileC) wt[e / kTileC][e % kTileC] = wnext[u];
    }
    __syncthreads();
    // The epilogue's loads of the 4 tokens are issued before the FMAs, so they are in flight
    // during them (sampled stalls: half the kernel waited on these loads after the FMAs).
    float x[4][4], d[4][4], g[4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const long tok = tok0 + 4 * ty + a;
      if (tok >= n || ch >= C) continue;
      const long e = tok * D + static_cast<long>(i) * C + ch;
      load4(X_in + e, vec, valid, x[a]);
      load4(dX + e, vec, valid, d[a]);
      load4(du + tok * C + ch, vec, valid, g[a]);
    }
    float gln[4][4], gy[4][4];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) gln[a][b] = gy[a][b] = 0.f;
    for (int row = 0; row < N; ++row) {
      const float4 zr = *reinterpret_cast<const float4*>(&dzT[row][4 * ty]);
      const float4 wr = *reinterpret_cast<const float4*>(&wt[row][4 * tx]);
      const float4 zp = *reinterpret_cast<const float4*>(&dzT[N + row][4 * ty]);
      const float4 wp = *reinterpret_cast<const float4*>(&wt[N + row][4 * tx]);
      const float zrv[4] = {zr.x, zr.y, zr.z, zr.w}, wrv[4] = {wr.x, wr.y, wr.z, wr.w};
      const float zpv[4] = {zp.x, zp.y, zp.z, zp.w}, wpv[4] = {wp.x, wp.y, wp.z, wp.w};
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          gln[a][b] += zrv[a] * wrv[b];
          gy[a][b] += zpv[a] * wpv[b];
        }
    }
    if (i + 1 < N) fetch(i + 1);  // in flight during the epilogue and the next barrier
    if (ch >= C) continue;
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const long tok = tok0 + 4 * ty + a;
      if (tok >= n) continue;
      const float* st4 = c.stats + tok * 4;
      const float* cr = c.corr + tok * 4;
      const float mean = st4[0], rstd_ln = st4[1], rstd = st4[2], hp = c.hpre[tok * N + i];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        d[a][b] += hp * g[a][b] + rstd * (gy[a][b] - x[a][b] * rstd * cr[0]);
        if (s.has_router) {
          const float ln = (x[a][b] - mean) * rstd_ln;
          d[a][b] += rstd_ln * (gln[a][b] - cr[1] - ln * cr[2]);
        }
      }
      store4(dX + tok * D + static_cast<long>(i) * C + ch, vec, valid, d[a]);
    }
  }
}

// Per token: GEMM coefficients for the router / read-map weight gradients, so that
// G_router[i] += sum_tok (dz_r rstd_ln) x - (sum_tok dz_r rstd_ln mean) and
// G_pre[i] += sum_tok (alpha dz_p rstd) x: the normalised state is never materialised.
__global__ void state_coef_kernel(XhcShape s, XhcDevParams P, XhcDevCache c, int ldc) {
  const long tok = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (tok >= s.tokens()) return;
  const int N = s.N;
  const float* st4 = c.stats + tok * 4;
  for (int i = 0; i < N; ++i) {
    st(c.coef + tok * ldc + i, c.dz_proj[tok * 2 * N + i] * st4[1]);
    st(c.coef + tok * ldc + N + i, P.pre_alpha[0] * c.dz_proj[tok * 2 * N + N + i] * st4[2]);
  }
}

// The res / post GEMM coefficients alpha dz rstd_a, one thread per (token, row). Xa, the
// GEMM's other operand, was gathered into c.xa by XhcPreLaunch.
__global__ void active_coef_kernel(XhcShape s, XhcDevParams P, XhcDevCache c, int ldc) {
  const int Q = s.Q(), kk = s.k * s.k;
  const long e = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (e >= s.tokens() * Q) return;
  const long tok = e / Q;
  const int q = static_cast<int>(e % Q);
  const float alpha = q < kk ? P.res_alpha[0] : P.post_alpha[0];
  st(c.coef + tok * ldc + q, alpha * c.dz_map[e] * c.stats[tok * 4 + 3]);
}

// One block per scalar gradient, reducing over tokens in a fixed order (deterministic).
// Blocks: [0,N) router bias, [N,2N) pre bias, [2N,2N+Q) res / post bias, then pre.alpha,
// res.alpha, post.alpha, then [.., +N) the router rows' LayerNorm mean correction, which is
// subtracted from the GEMM result by row_correct_kernel.
__global__ void small_grads_kernel(XhcShape s, XhcDevCache c, XhcDevGrads G, float* rowc) {
  __shared__ float red[32];
  const int N = s.N, Q = s.Q(), kk = s.k * s.k, b = blockIdx.x;
  const long n = s.tokens();
  float a = 0.f;
  for (long tok = threadIdx.x; tok < n; tok += blockDim.x) {
    const float* dz = c.dz_proj + tok * 2 * N;
    const float* dm = c.dz_map + tok * Q;
    const float* st4 = c.stats + tok * 4;
    if (b < 2 * N) {
      a += dz[b];
    } else if (b < 2 * N + Q) {
      a += dm[b - 2 * N];
    } else if (b == 2 * N + Q) {
      for (int i = 0; i < N; ++i) a += dz[N + i] * st4[2] * c.proj[tok * 2 * N + N + i];
    } else if (b == 2 * N + Q + 1) {
      for (int q = 0; q < kk; ++q) a += dm[q] * st4[3] * c.map_raw[tok * Q + q];
    } else if (b == 2 * N + Q + 2) {
      for (int q = kk; q < Q; ++q) a += dm[q] * st4[3] * c.map_raw[tok * Q + q];
    } else {
      const int i = b - (2 * N + Q + 3);
      a += dz[i] * st4[1] * st4[0];
    }
  }
  a = block_sum(a, red);
  if (threadIdx.x != 0) return;
  if (b < N) {
    if (s.has_router) G.router_bias[b] += a;
  } else if (b < 2 * N) {
    G.pre_bias[b - N] += a;
  } else if (b < 2 * N + kk) {
    G.res_bias[b - 2 * N] += a;
  } else if (b < 2 * N + Q) {
    G.post_bias[b - 2 * N - kk] += a;
  } else if (b == 2 * N + Q) {
    G.pre_alpha[0] += a;
  } else if (b == 2 * N + Q + 1) {
    G.res_alpha[0] += a;
  } else if (b == 2 * N + Q + 2) {
    G.post_alpha[0] += a;
  } else {
    rowc[b - (2 * N + Q + 3)] = a;
  }
}

__global__ void row_correct_kernel(float* G, const float* rowc, long L) {
  const float cst = rowc[blockIdx.y];
  for (long e = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; e < L;
       e += static_cast<long>(gridDim.x) * blockDim.x) {
    G[blockIdx.y * L + e] -= cst;
  }
}

// G (rows, L) row-major += coef[:, col0:col0+rows]^T . A with A (n, L) row-major bf16.
int GemmAccum(cublasHandle_t h, cudaStream_t st, const bf16_t* A, const bf16_t* coef, int ldc,
              int rows, int L, long n, float* G) {
  cublasStatus_t e = cublasSetStream(h, st);
  if (e != CUBLAS_STATUS_SUCCESS) return kXhcErrCublasBase + static_cast<int>(e);
  const float one = 1.f;
  // Column-major view: G^T (L x rows) += A^T (L x n) . coef_cols (rows x n)^T.
  e = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, L, rows, static_cast<int>(n), &one, A,
                   CUDA_R_16BF, L, coef, CUDA_R_16BF, ldc, &one, G, CUDA_R_32F, L,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return e == CUBLAS_STATUS_SUCCESS ? 0 : kXhcErrCublasBase + static_cast<int>(e);
}

template <int MK, int K>
int LaunchPostBackward(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                       const bf16_t* out, const bf16_t* dX_new, XhcDevCache* c, bf16_t* d_out,
                       cudaStream_t st) {
  const size_t smem = sizeof(float) * (K > 1 ? 2 * K * s.C : 1);
  auto kernel = post_backward_kernel<MK, K>;
  XHC_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
  kernel<<<s.tokens(), kThreads, smem, st>>>(s, P, X_in, out, dX_new, *c, d_out);
  XHC_LAUNCH_CHECK();
  return 0;
}

template <int MK>
int DispatchPostBackward(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                         const bf16_t* out, const bf16_t* dX_new, XhcDevCache* c,
                         bf16_t* d_out, cudaStream_t st) {
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
  sinkhorn_backward_kernel<<<ceil_div(s.tokens(), threads), threads, threads * hist, st>>>(
      s, P, *c);
  XHC_LAUNCH_CHECK();
  return 0;
}

}  // namespace

int XhcBackwardOutLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                         const bf16_t* out, const bf16_t* dX_new, XhcDevCache* c,
                         bf16_t* d_out, void* stream) {
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
    sinkhorn_backward16_kernel<<<ceil_div(s.tokens() * 16, 256), 256, smem, st>>>(s, P, *c,
                                                                                  stride);
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

int XhcBackwardInputLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                           const bf16_t* du, bf16_t* dX, XhcDevCache* c, void* stream) {
  XHC_TRY(XhcCheckShape(s));
  cudaStream_t st = as_stream(stream);
  if (s.C % 8 == 0) {
    input_stats_kernel<8><<<s.tokens(), kThreads, 0, st>>>(s, P, X_in, du, *c);
  } else {
    input_stats_kernel<1><<<s.tokens(), kThreads, 0, st>>>(s, P, X_in, du, *c);
  }
  XHC_LAUNCH_CHECK();
  if (s.k <= 4) {
    // Channel tiles fastest: blocks in flight together cover whole rows of the state.
    const dim3 grid(ceil_div(s.C, kTileC), ceil_div(s.tokens(), kTileT));
    input_active_kernel<<<grid, kThreads, 0, st>>>(s, P, X_in, dX, *c);
    XHC_LAUNCH_CHECK();
    if (s.N <= 16) {
      input_dense_kernel<32><<<grid, kThreads, 0, st>>>(s, P, X_in, du, dX, *c);
    } else {
      input_dense_kernel<2 * kMaxStreams><<<grid, kThreads, 0, st>>>(s, P, X_in, du, dX, *c);
    }
    XHC_LAUNCH_CHECK();
    return 0;
  }
  // k > 4: one pass per 16 tokens x 32 channels (its per-thread tiles would not fit).
  const dim3 grid(ceil_div(s.tokens(), kTM), ceil_div(s.C, kTC));
  input_apply_kernel<<<grid, kThreads, 0, st>>>(s, P, X_in, du, dX, *c);
  XHC_LAUNCH_CHECK();
  return 0;
}

int XhcBackwardWeightsLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                             const bf16_t* out, XhcDevCache* c, const XhcDevGrads& G,
                             void* cublas, void* stream) {
  XHC_TRY(XhcCheckShape(s));
  cudaStream_t st = as_stream(stream);
  cublasHandle_t h = static_cast<cublasHandle_t>(cublas);
  const long n = s.tokens();
  const int N = s.N, kk = s.k * s.k, Q = s.Q(), ldc = std::max(2 * N, Q);
  state_coef_kernel<<<ceil_div(n, 128), 128, 0, st>>>(s, P, *c, ldc);
  XHC_LAUNCH_CHECK();
  if (s.has_router) XHC_TRY(GemmAccum(h, st, X_in, c->coef, ldc, N, s.D(), n, G.router_weight));
  XHC_TRY(GemmAccum(h, st, X_in, c->coef + N, ldc, N, s.D(), n, G.pre_weight));
  // The row corrections live in the corr scratch of the first tokens (no extra allocation):
  // corr is not needed after XhcBackwardInput. Needs n*4 >= N floats.
  float* rowc = c->corr;
  const int blocks = 2 * N + Q + 3 + (s.has_router && 4 * n >= N ? N : 0);
  small_grads_kernel<<<blocks, kThreads, 0, st>>>(s, *c, G, rowc);
  XHC_LAUNCH_CHECK();
  if (s.has_router) {
    if (4 * n < N) return kXhcErrInvalidArgument;
    row_correct_kernel<<<dim3(ceil_div(s.D(), 1024 * 4), N), 1024, 0, st>>>(G.router_weight,
                                                                             rowc, s.D());
    XHC_LAUNCH_CHECK();
  }
  active_coef_kernel<<<ceil_div(n * Q, kThreads), kThreads, 0, st>>>(s, P, *c, ldc);
  XHC_LAUNCH_CHECK();
  XHC_TRY(GemmAccum(h, st, c->xa, c->coef, ldc, kk, s.Da(), n, G.res_weight));
  XHC_TRY(GemmAccum(h, st, c->xa, c->coef + kk, ldc, s.k * s.K, s.Da(), n, G.post_weight));
  if (s.r > 0) {
    int taps = 0;
    for (int j = 0; j < s.r; ++j) taps += s.kernels[j];
    const int parts = s.B * ceil_div(s.T, kConvChunk);
    conv_weight_part_kernel<<<dim3(ceil_div(s.C, 128), parts), 128, 0, st>>>(s, out, *c, taps);
    XHC_LAUNCH_CHECK();
    conv_weight_reduce_kernel<<<ceil_div(static_cast<long>(taps) * s.C, 128), 128, 0, st>>>(
        s, *c, G, taps, parts);
    XHC_LAUNCH_CHECK();
  }
  return 0;
}

}  // namespace xhc::cuda
