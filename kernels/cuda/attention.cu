// Causal GQA attention, simple and correct (not flash): one warp per (b, h, query) with an
// online softmax for the forward; the backward computes D_i = dout_i . out_i, then dq per
// query warp and dk / dv per key warp (summing over the group's heads and later queries),
// recomputing P_ij = exp(s_ij - lse_i). dh <= 256 (each lane holds dh / 32 values).

#include <cmath>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {
namespace {

constexpr int kMaxPer = 8;  // dh / 32

__device__ inline long QIdx(int b, int t, int h, int T, int H, int dh) {
  return ((static_cast<long>(b) * T + t) * H + h) * dh;
}

__global__ void attn_fwd_kernel(const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out,
                                float* lse, int B, int T, int H, int Hkv, int dh) {
  const long wid = (blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wid >= static_cast<long>(B) * H * T) return;
  const int i = static_cast<int>(wid % T), h = static_cast<int>((wid / T) % H);
  const int b = static_cast<int>(wid / (static_cast<long>(T) * H)), g = h / (H / Hkv);
  const float scale = rsqrtf(static_cast<float>(dh));
  float qv[kMaxPer], acc[kMaxPer];
  const int per = (dh + 31) / 32;
  for (int e = 0; e < per; ++e) {
    const int d = lane + 32 * e;
    qv[e] = d < dh ? ld(q + QIdx(b, i, h, T, H, dh) + d) : 0.f;
    acc[e] = 0.f;
  }
  float mx = -INFINITY, sum = 0.f;
  for (int j = 0; j <= i; ++j) {
    const long kb = QIdx(b, j, g, T, Hkv, dh);
    float sc = 0.f;
    for (int e = 0; e < per; ++e) {
      const int d = lane + 32 * e;
      if (d < dh) sc += qv[e] * ld(k + kb + d);
    }
    sc = warp_sum(sc) * scale;
    const float nm = fmaxf(mx, sc), corr = expf(mx - nm), pj = expf(sc - nm);
    sum = sum * corr + pj;
    for (int e = 0; e < per; ++e) {
      const int d = lane + 32 * e;
      acc[e] = acc[e] * corr + (d < dh ? pj * ld(v + kb + d) : 0.f);
    }
    mx = nm;
  }
  for (int e = 0; e < per; ++e) {
    const int d = lane + 32 * e;
    if (d < dh) st(out + QIdx(b, i, h, T, H, dh) + d, acc[e] / sum);
  }
  if (lane == 0) lse[(static_cast<long>(b) * H + h) * T + i] = mx + logf(sum);
}

__global__ void attn_d_kernel(const bf16_t* dout, const bf16_t* out, float* Dv, long rows, int dh) {
  const long wid = (blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wid >= rows) return;
  float a = 0.f;
  for (int d = lane; d < dh; d += 32) a += ld(dout + wid * dh + d) * ld(out + wid * dh + d);
  a = warp_sum(a);
  if (lane == 0) Dv[wid] = a;  // indexed like (B,T,H)
}

__global__ void attn_dq_kernel(const bf16_t* dout, const bf16_t* q, const bf16_t* k,
                               const bf16_t* v, const float* lse, const float* Dv, bf16_t* dq,
                               int B, int T, int H, int Hkv, int dh) {
  const long wid = (blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wid >= static_cast<long>(B) * H * T) return;
  const int i = static_cast<int>(wid % T), h = static_cast<int>((wid / T) % H);
  const int b = static_cast<int>(wid / (static_cast<long>(T) * H)), g = h / (H / Hkv);
  const float scale = rsqrtf(static_cast<float>(dh));
  const int per = (dh + 31) / 32;
  const long qb = QIdx(b, i, h, T, H, dh);
  const float l = lse[(static_cast<long>(b) * H + h) * T + i];
  const float Di = Dv[(static_cast<long>(b) * T + i) * H + h];
  float qv[kMaxPer], dov[kMaxPer], acc[kMaxPer];
  for (int e = 0; e < per; ++e) {
    const int d = lane + 32 * e;
    qv[e] = d < dh ? ld(q + qb + d) : 0.f;
    dov[e] = d < dh ? ld(dout + qb + d) : 0.f;
    acc[e] = 0.f;
  }
  for (int j = 0; j <= i; ++j) {
    const long kb = QIdx(b, j, g, T, Hkv, dh);
    float sc = 0.f, dp = 0.f;
    for (int e = 0; e < per; ++e) {
      const int d = lane + 32 * e;
      if (d < dh) sc += qv[e] * ld(k + kb + d), dp += dov[e] * ld(v + kb + d);
    }
    sc = warp_sum(sc);
    dp = warp_sum(dp);
    const float ds = expf(sc * scale - l) * (dp - Di);
    for (int e = 0; e < per; ++e) {
      const int d = lane + 32 * e;
      if (d < dh) acc[e] += scale * ds * ld(k + kb + d);
    }
  }
  for (int e = 0; e < per; ++e) {
    const int d = lane + 32 * e;
    if (d < dh) st(dq + qb + d, acc[e]);
  }
}

__global__ void attn_dkv_kernel(const bf16_t* dout, const bf16_t* q, const bf16_t* k,
                                const bf16_t* v, const float* lse, const float* Dv, bf16_t* dk,
                                bf16_t* dv, int B, int T, int H, int Hkv, int dh) {
  const long wid = (blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (wid >= static_cast<long>(B) * Hkv * T) return;
  const int j = static_cast<int>(wid % T), g = static_cast<int>((wid / T) % Hkv);
  const int b = static_cast<int>(wid / (static_cast<long>(T) * Hkv)), group = H / Hkv;
  const float scale = rsqrtf(static_cast<float>(dh));
  const int per = (dh + 31) / 32;
  const long kb = QIdx(b, j, g, T, Hkv, dh);
  float kv[kMaxPer], vv[kMaxPer], ak[kMaxPer], av[kMaxPer];
  for (int e = 0; e < per; ++e) {
    const int d = lane + 32 * e;
    kv[e] = d < dh ? ld(k + kb + d) : 0.f;
    vv[e] = d < dh ? ld(v + kb + d) : 0.f;
    ak[e] = av[e] = 0.f;
  }
  for (int h = g * group; h < (g + 1) * group; ++h) {
    for (int i = j; i < T; ++i) {
      const long qb = QIdx(b, i, h, T, H, dh);
      float sc = 0.f, dp = 0.f;
      for (int e = 0; e < per; ++e) {
        const int d = lane + 32 * e;
        if (d < dh) sc += kv[e] * ld(q + qb + d), dp += vv[e] * ld(dout + qb + d);
      }
      sc = warp_sum(sc);
      dp = warp_sum(dp);
      const float p = expf(sc * scale - lse[(static_cast<long>(b) * H + h) * T + i]);
      const float ds = p * (dp - Dv[(static_cast<long>(b) * T + i) * H + h]);
      for (int e = 0; e < per; ++e) {
        const int d = lane + 32 * e;
        if (d < dh) ak[e] += scale * ds * ld(q + qb + d), av[e] += p * ld(dout + qb + d);
      }
    }
  }
  for (int e = 0; e < per; ++e) {
    const int d = lane + 32 * e;
    if (d < dh) st(dk + kb + d, ak[e]), st(dv + kb + d, av[e]);
  }
}

int WarpGrid(long warps) { return static_cast<int>((warps * 32 + 255) / 256); }

}  // namespace

int AttentionForward(const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse,
                     int B, int T, int H, int Hkv, int dh, void* stream) {
  if (dh > 32 * kMaxPer || Hkv <= 0 || H % Hkv != 0) return kXhcErrInvalidArgument;
  attn_fwd_kernel<<<WarpGrid(static_cast<long>(B) * H * T), 256, 0, as_stream(stream)>>>(
      q, k, v, out, lse, B, T, H, Hkv, dh);
  XHC_LAUNCH_CHECK();
  return 0;
}

int AttentionBackward(const bf16_t* dout, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                      const bf16_t* out, const float* lse, bf16_t* dq, bf16_t* dk, bf16_t* dv,
                      float* scratch_d, int B, int T, int H, int Hkv, int dh, void* stream) {
  if (dh > 32 * kMaxPer || Hkv <= 0 || H % Hkv != 0) return kXhcErrInvalidArgument;
  cudaStream_t st = as_stream(stream);
  const long rows = static_cast<long>(B) * T * H;
  attn_d_kernel<<<WarpGrid(rows), 256, 0, st>>>(dout, out, scratch_d, rows, dh);
  XHC_LAUNCH_CHECK();
  attn_dq_kernel<<<WarpGrid(rows), 256, 0, st>>>(dout, q, k, v, lse, scratch_d, dq, B, T, H, Hkv,
                                                 dh);
  XHC_LAUNCH_CHECK();
  attn_dkv_kernel<<<WarpGrid(static_cast<long>(B) * T * Hkv), 256, 0, st>>>(
      dout, q, k, v, lse, scratch_d, dk, dv, B, T, H, Hkv, dh);
  XHC_LAUNCH_CHECK();
  return 0;
}

}  // namespace xhc::cuda
