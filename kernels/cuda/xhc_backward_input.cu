// Input gradient, second half (XhcBackwardInputLaunch: dX in place, given du):
//   input_stats_kernel     per token: read-map gradients (N dots with du) and the scalar
//                          normalisation corrections, which follow from the cached raw
//                          projections (sum(g*y) = alpha sum_i dz_i rstd proj_i) so no
//                          reduction over the N*C state is needed for them.
//   input_active_kernel,   k <= 4: the active streams' mixing and map terms (register-tiled),
//   dense_apply_kernel,    then every stream's element-wise terms, then the read / router
//   + a cuBLAS GEMM        map term as a GEMM accumulated into dX (below); k > 4:
//                          input_apply_kernel, one pass per 16 tokens x 32 channels.

#include <cublas_v2.h>

#include <algorithm>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

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
  block_sum_many<kMaxStreams, kWarps>(acc, wred, dots, N);
  const int lane = threadIdx.x & 31;
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
      for (int j = 0; j < k; ++j)
        if (idx[tm][j] == i) slot = j;
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
        for (int q = kk; q < Q; ++q)
          gp += dzm[q] * P.post_weight[(q - kk) * static_cast<long>(Da) + col];
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
    for (int b = 0; b < 4; ++b)
      if (b < valid) st(p + b, v[b]);
  }
}

__global__ void __launch_bounds__(kThreads, 2)
    input_active_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X_in, bf16_t* dX,
                        XhcDevCache c) {
  __shared__ __align__(16) float dzT[kTileQ][kTileT + 4];  // [row][token], alpha folded in
  __shared__ __align__(16) float wt[kTileQ][4][kTileC];    // [row][slot][channel]
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
        for (int jj = 0; jj < 4; ++jj)
          if (jj < k) mix += hr[jj][j] * dA[jj][b];
        o[b] = mix + ra * (g[a][j][b] - xa[j][b] * ra * corr3);
      }
      store4(dX + tok * D + static_cast<long>(idx[j]) * C + ch, vec, valid, o);
    }
  }
}

// The dense pass for k <= 4, after input_active_kernel, in two parts:
//   dense_apply_kernel  the element-wise terms, for every stream i (in place):
//                         dX[tok, i, ch] += hpre_i du[ch] - rstd^2 corr0 x
//                           - rstd_ln (corr1 + ln(x) corr2)            (router only)
//   a cuBLAS GEMM       the map-gradient term, dX += Z . Wcat with beta = 1 (bf16 dX, float32
//                       accumulation): Z (n, R) per token z_r = rstd_ln dzr_r (router rows
//                       r < N) and alpha_pre rstd dzp_r (read-map rows), Wcat (R, D) = the
//                       router rows over the read-map rows, R = 2N. Both are split into bf16
//                       hi + lo (hi.hi + lo.hi + hi.lo, K = 3R) for float32-like products.
// One register-tiled kernel for the whole pass ran at 1.06 TB/s, latency-bound at 128
// registers (docs/design/cuda-kernels.md); the GEMM's K of 96 is a sliver of tensor-core
// work, so both parts are bandwidth passes over the state.

// Z (n, 3R) bf16: per token [hi(z), hi(z), lo(z)], matching wsplit's three row blocks.
__global__ void dense_coef_kernel(XhcShape s, XhcDevParams P, XhcDevCache c, bf16_t* Z) {
  const long tok = blockIdx.x * static_cast<long>(blockDim.y) + threadIdx.y;
  const int N = s.N, R = 2 * N, r = threadIdx.x;
  if (tok >= s.tokens() || r >= R) return;
  const float* st4 = c.stats + tok * 4;
  float z = 0.f;
  if (r >= N) {
    z = P.pre_alpha[0] * st4[2] * c.dz_proj[tok * R + r];
  } else if (s.has_router) {
    z = st4[1] * c.dz_proj[tok * R + r];
  }
  const __nv_bfloat16 hi = __float2bfloat16(z);
  bf16_t* row = Z + tok * 3 * R;
  *reinterpret_cast<__nv_bfloat16*>(row + r) = hi;
  *reinterpret_cast<__nv_bfloat16*>(row + R + r) = hi;
  st(row + 2 * R + r, z - __bfloat162float(hi));
}

// One block per token; V = 8 needs C % 8 == 0 (16-byte groups inside one stream's row).
template <int V>
__global__ void __launch_bounds__(kThreads)
    dense_apply_kernel(XhcShape s, const bf16_t* __restrict__ X_in, const bf16_t* __restrict__ du,
                       bf16_t* dX, XhcDevCache c) {
  __shared__ float hp[kMaxStreams];
  const long tok = blockIdx.x;
  const int N = s.N, C = s.C;
  const long D = s.D();
  if (threadIdx.x < N) hp[threadIdx.x] = c.hpre[tok * N + threadIdx.x];
  __syncthreads();
  const float* st4 = c.stats + tok * 4;
  const float* cr = c.corr + tok * 4;
  const float mean = st4[0], rstd_ln = st4[1], rstd = st4[2];
  // d += hp du + a x + b, with a = -rstd^2 corr0 - rstd_ln^2 corr2 and
  // b = -rstd_ln (corr1 - mean rstd_ln corr2) (router); a = -rstd^2 corr0, b = 0 otherwise.
  float a = -rstd * rstd * cr[0], b = 0.f;
  if (s.has_router) {
    a -= rstd_ln * rstd_ln * cr[2];
    b = -rstd_ln * (cr[1] - mean * rstd_ln * cr[2]);
  }
  const bf16_t* x_row = X_in + tok * D;
  bf16_t* d_row = dX + tok * D;
  for (long e = static_cast<long>(threadIdx.x) * V; e < D; e += static_cast<long>(kThreads) * V) {
    const int i = static_cast<int>(e / C), ch = static_cast<int>(e % C);
    float x[V], d[V], g[V];
    load_v<V>(x_row + e, x);
    load_v<V>(d_row + e, d);
    load_v<V>(du + tok * C + ch, g);
    const float h = hp[i];
#pragma unroll
    for (int v = 0; v < V; ++v) d[v] += h * g[v] + a * x[v] + b;
    store_v<V>(d_row + e, d);
  }
}

}  // namespace

int XhcBackwardInputLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                           const bf16_t* du, bf16_t* dX, XhcDevCache* c, void* cublas,
                           void* stream) {
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
    const long n = s.tokens(), D = s.D();
    const int N = s.N, R = 2 * N;
    if (s.C % 8 == 0) {
      dense_apply_kernel<8><<<n, kThreads, 0, st>>>(s, X_in, du, dX, *c);
    } else {
      dense_apply_kernel<1><<<n, kThreads, 0, st>>>(s, X_in, du, dX, *c);
    }
    XHC_LAUNCH_CHECK();
    // wsplit (3R, D): rows [hi(Wcat); lo(Wcat); hi(Wcat)].
    split_rows_kernel<3>
        <<<std::min<long>(ceil_div(long(R) * D, kThreads), 4096), kThreads, 0, st>>>(
            s.has_router ? P.router_weight : nullptr, N, P.pre_weight, N, D, c->wsplit);
    XHC_LAUNCH_CHECK();
    // gemm_out is the forward's scratch; here it holds Z (n, 3R) bf16 (its n * 4N floats
    // are n * 8N >= n * 6N bf16).
    bf16_t* Z = reinterpret_cast<bf16_t*>(c->gemm_out);
    const int per_block = std::max(1, kThreads / R);
    dense_coef_kernel<<<ceil_div(n, per_block), dim3(R, per_block), 0, st>>>(s, P, *c, Z);
    XHC_LAUNCH_CHECK();
    cublasHandle_t h = static_cast<cublasHandle_t>(cublas);
    cublasStatus_t e = cublasSetStream(h, st);
    if (e != CUBLAS_STATUS_SUCCESS) return kXhcErrCublasBase + static_cast<int>(e);
    const float one = 1.f;
    // Column-major: dX^T (D x n) += wsplit^T (D x 3R; wsplit row-major (3R, D)) . Z^T (3R x n).
    e = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(D), static_cast<int>(n), 3 * R,
                     &one, c->wsplit, CUDA_R_16BF, static_cast<int>(D), Z, CUDA_R_16BF, 3 * R, &one,
                     dX, CUDA_R_16BF, static_cast<int>(D), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return e == CUBLAS_STATUS_SUCCESS ? 0 : kXhcErrCublasBase + static_cast<int>(e);
  }
  // k > 4: one pass per 16 tokens x 32 channels (its per-thread tiles would not fit).
  const dim3 grid(ceil_div(s.tokens(), kTM), ceil_div(s.C, kTC));
  input_apply_kernel<<<grid, kThreads, 0, st>>>(s, P, X_in, du, dX, *c);
  XHC_LAUNCH_CHECK();
  return 0;
}

}  // namespace xhc::cuda
