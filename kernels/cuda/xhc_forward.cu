// Forward kernels of the xHC sublayer (model-spec 4.2), the paper's two-stage design:
//   mapping generation   the projections are thin GEMMs (tokens x N*C against N*C x 2N, and
//                        tokens x k*C against k*C x Q) on the tensor cores through cuBLAS:
//                        the float32 weights are split into bf16 hi + lo rows
//                        (split_rows_kernel), so bf16 x bf16 products with float32
//                        accumulation keep float32 accuracy. state_stats_kernel gives the
//                        LayerNorm / RMS statistics in one read of the state; the
//                        normalisations are applied AFTER the projection in maps_kernel
//                        (ln(x).w = rstd_ln (x.w - mean sum(w)), rms(x).w = rstd x.w) with
//                        the sigmoids and the fixed + top-(k-m) selection.
//                        gather_active_kernel copies the active streams (and their RMS) for
//                        the second GEMM; sinkhorn_maps_kernel: Sinkhorn per token.
//   mapping application  read_mix_kernel: dense read u = sum_i hpre_i X_i fused with the
//                        active mixing Hres . Xa (written in place into X's active streams);
//                        conv_forward_kernel: the r causal depthwise convolutions (sliding
//                        windows along the sequence); gram_schmidt_kernel: per token;
//                        post_kernel<K>: X[idx_j] += p_j sum_r Hpost[j][r] aug_r, consuming
//                        out and the conv outputs directly (no stacked (n,K,C) tensor).

#include <cublas_v2.h>

#include <cstdio>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRows = 96;  // Q = k*k + k*K (k <= 8, K <= 4)

// Per token: sum and sum of squares of the N*C state (16-byte loads when rows allow), then
// mean, rstd_ln and rstd into stats[0..2]. V = 8 needs D % 8 == 0 (every row 16-byte aligned).
template <int V>
__global__ void __launch_bounds__(kThreads)
    state_stats_kernel(XhcShape s, const bf16_t* __restrict__ X, XhcDevCache c) {
  __shared__ float red[32];
  const long tok = blockIdx.x;
  const int D = s.D();
  const bf16_t* x = X + tok * D;
  float sum = 0.f, sq = 0.f;
  for (int e = threadIdx.x * V; e < D; e += kThreads * V) {
    float v[V];
    load_v<V>(x + e, v);
#pragma unroll
    for (int i = 0; i < V; ++i) sum += v[i], sq += v[i] * v[i];
  }
  sum = block_sum(sum, red);
  sq = block_sum(sq, red);
  if (threadIdx.x != 0) return;
  const float mean = sum / D;
  const float var = fmaxf(sq / D - mean * mean, 0.f);  // state is near zero-mean
  float* st4 = c.stats + tok * 4;
  st4[0] = mean, st4[1] = rsqrtf(var + 1e-6f), st4[2] = rsqrtf(sq / D + 1e-6f);
}

// Splits float32 weight rows into bf16 hi and lo parts, w = hi + lo to ~16 significant bits:
// rows [0, R0) from W0 (zeros when W0 is null: mhc has no router), [R0, R0 + R1) from W1,
// hi rows at out[0, R), lo rows at out[R, 2R). With bf16 operands both products are exact in
// float32, so the tensor-core GEMM x . [hi; lo]^T summed pairwise is float32-accurate.
// out (n, 2R) float32 row-major = A (n, L) bf16 row-major (leading dimension lda) times the
// split weights (2R, L)^T: column r + column R + r is the float32 projection on row r.
int SplitGemm(cublasHandle_t h, cudaStream_t st, const bf16_t* A, long lda, const bf16_t* w, int R,
              int L, long n, float* out) {
  cublasStatus_t e = cublasSetStream(h, st);
  if (e != CUBLAS_STATUS_SUCCESS) return kXhcErrCublasBase + static_cast<int>(e);
  const float one = 1.f, zero = 0.f;
  // Column-major: out^T (2R x n) = w (2R x L, stored as L x 2R: op T) . A^T (L x n).
  e = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, 2 * R, static_cast<int>(n), L, &one, w, CUDA_R_16BF,
                   L, A, CUDA_R_16BF, static_cast<int>(lda), &zero, out, CUDA_R_32F, 2 * R,
                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return e == CUBLAS_STATUS_SUCCESS ? 0 : kXhcErrCublasBase + static_cast<int>(e);
}

// One thread per token: the router and read-map projections from the split GEMM, the
// normalisations applied after the projection (ln(x).w = rstd_ln (x.w - mean sum(w)),
// rms(x).w = rstd x.w), the sigmoids and the fixed + top-(k-m) selection.
__global__ void maps_kernel(XhcShape s, XhcDevParams P, const float* __restrict__ g,
                            XhcDevCache c) {
  const long tok = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (tok >= s.tokens()) return;
  const int N = s.N, k = s.k;
  const float* o = g + tok * 4 * N;  // hi: router N, pre N; then lo: router N, pre N
  const float* st4 = c.stats + tok * 4;
  const float mean = st4[0], rstd_ln = st4[1], rstd = st4[2];
  float sv[kMaxStreams];
  for (int i = 0; i < N; ++i) {
    float si = 0.f, pr = 0.f;
    if (s.has_router) {
      pr = o[i] + o[2 * N + i];
      si = sigmoidf_(rstd_ln * (pr - mean * c.wsum[i]) + P.router_bias[i]);
    }
    sv[i] = si;
    c.s[tok * N + i] = si;
    c.proj[tok * 2 * N + i] = pr;
    const float pp = o[N + i] + o[3 * N + i];
    c.proj[tok * 2 * N + N + i] = pp;
    c.hpre[tok * N + i] = sigmoidf_(P.pre_alpha[0] * rstd * pp + P.pre_bias[i]);
  }
  int* idx = c.idx + tok * k;
  float* p = c.p + tok * k;
  if (!s.has_router) {
    for (int j = 0; j < k; ++j) idx[j] = j, p[j] = 1.f;
    return;
  }
  unsigned taken = 0;
  for (int j = 0; j < s.m; ++j) idx[j] = j, p[j] = 1.f;
  for (int j = s.m; j < k; ++j) {  // highest s first; ties to the lower stream index
    int best = -1;
    for (int i = s.m; i < N; ++i) {
      if (taken & (1u << i)) continue;
      if (best < 0 || sv[i] > sv[best]) best = i;
    }
    taken |= 1u << best;
    idx[j] = best;
    p[j] = sv[best];
  }
}

// One block per token: Xa = the k active streams of X (before the mixing) into c.xa, which
// the res / post GEMM reads contiguously, and rstd_a = rms(Xa)^-1 into stats[3].
template <int V>
__global__ void __launch_bounds__(kThreads)
    gather_active_kernel(XhcShape s, const bf16_t* __restrict__ X, XhcDevCache c) {
  __shared__ float red[32];
  __shared__ int idx[kMaxActive];
  const long tok = blockIdx.x;
  const int k = s.k, C = s.C, Da = s.Da();
  if (threadIdx.x < k) idx[threadIdx.x] = c.idx[tok * k + threadIdx.x];
  __syncthreads();
  float sq = 0.f;
  for (int e = threadIdx.x * V; e < Da; e += kThreads * V) {  // V divides C: no straddle
    const int j = e / C, ch = e % C;
    float v[V];
    load_v<V>(X + tok * s.D() + static_cast<long>(idx[j]) * C + ch, v);
    store_v<V>(c.xa + tok * Da + e, v);  // exact: the values are bf16 already
#pragma unroll
    for (int i = 0; i < V; ++i) sq += v[i] * v[i];
  }
  sq = block_sum(sq, red);
  if (threadIdx.x == 0) c.stats[tok * 4 + 3] = rsqrtf(sq / Da + 1e-6f);
}

// One thread per token: res / post maps from the split GEMM, Sinkhorn, 2 sigmoid.
__global__ void sinkhorn_maps_kernel(XhcShape s, XhcDevParams P, const float* __restrict__ g,
                                     XhcDevCache c) {
  const long tok = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (tok >= s.tokens()) return;
  const int k = s.k, kk = k * k, Q = s.Q(), K = s.K;
  const float* o = g + tok * 2 * Q;
  const float rstd_a = c.stats[tok * 4 + 3];
  float z[kMaxActive * kMaxActive], h[kMaxActive * kMaxActive];
  for (int q = 0; q < Q; ++q) c.map_raw[tok * Q + q] = o[q] + o[Q + q];
  for (int q = 0; q < kk; ++q) {
    z[q] = P.res_alpha[0] * rstd_a * (o[q] + o[Q + q]) + P.res_bias[q];
  }
  sinkhorn_forward(k, s.sinkhorn_iters, z, h);
  for (int q = 0; q < kk; ++q) c.hres[tok * kk + q] = h[q];
  for (int q = 0; q < k * K; ++q) {
    const float zp = P.post_alpha[0] * rstd_a * (o[kk + q] + o[Q + kk + q]) + P.post_bias[q];
    c.hpost[tok * k * K + q] = 2.f * sigmoidf_(zp);
  }
}

// wsum[i] = sum_e router.weight[i][e]: the LayerNorm mean correction of the router.
__global__ void row_sum_kernel(const float* __restrict__ W, int L, float* out) {
  __shared__ float red[32];
  float a = 0.f;
  for (int e = threadIdx.x; e < L; e += blockDim.x) a += W[static_cast<long>(blockIdx.x) * L + e];
  a = block_sum(a, red);
  if (threadIdx.x == 0) out[blockIdx.x] = a;
}

// One block per token: u = sum_i hpre_i X_i and X[idx_j] <- sum_j' Hres[j][j'] X[idx_j'].
// Each thread reads every value it overwrites before writing, so in place is safe.
template <int V>
__global__ void __launch_bounds__(kThreads)
    read_mix_kernel(XhcShape s, bf16_t* X, bf16_t* __restrict__ u, XhcDevCache c) {
  __shared__ float hpre[kMaxStreams], hres[kMaxActive * kMaxActive];
  __shared__ int idx[kMaxActive];
  const long tok = blockIdx.x;
  const int N = s.N, k = s.k, C = s.C;
  if (threadIdx.x < N) hpre[threadIdx.x] = c.hpre[tok * N + threadIdx.x];
  if (threadIdx.x < k * k) hres[threadIdx.x] = c.hres[tok * k * k + threadIdx.x];
  if (threadIdx.x < k) idx[threadIdx.x] = c.idx[tok * k + threadIdx.x];
  __syncthreads();
  bf16_t* x = X + tok * s.D();
  for (int c0 = threadIdx.x * V; c0 < C; c0 += kThreads * V) {
    float acc[V], v[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = 0.f;
    for (int i = 0; i < N; ++i) {
      load_v<V>(x + static_cast<long>(i) * C + c0, v);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] += hpre[i] * v[e];
    }
    store_v<V>(u + tok * C + c0, acc);
    float xa[kMaxActive][V];
#pragma unroll
    for (int j = 0; j < kMaxActive; ++j) {
      if (j < k) load_v<V>(x + static_cast<long>(idx[j]) * C + c0, xa[j]);
    }
#pragma unroll
    for (int j = 0; j < kMaxActive; ++j) {
      if (j >= k) continue;
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = 0.f;
#pragma unroll
      for (int jj = 0; jj < kMaxActive; ++jj) {
        if (jj >= k) continue;
        const float h = hres[j * k + jj];
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += h * xa[jj][e];
      }
      store_v<V>(x + static_cast<long>(idx[j]) * C + c0, acc);
    }
  }
}

// The r causal depthwise convolutions, g_j[t] = sum_{tau < kappa_j, tau <= t} w_j[tau]
// out[t - tau], into c.dg (float32 (n, r, C): backward scratch, free until the backward).
// Each thread walks kConvChunk tokens of one channel of one sequence with the weights and a
// window of the previous out rows in registers, so every out value and weight is read once
// per walk (one block per token re-read all the taps' weights from L2 for every token).
__global__ void conv_forward_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ out,
                                    XhcDevCache c) {
  const int C = s.C, r = s.r, T = s.T, ch = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunks = (T + kConvChunk - 1) / kConvChunk;
  const int b = blockIdx.y / chunks, t0 = (blockIdx.y % chunks) * kConvChunk;
  if (ch >= C) return;
  const int t1 = min(T, t0 + kConvChunk);
  float w[kMaxK - 1][kMaxTap], ow[kMaxTap];
  int widest = 0;
#pragma unroll
  for (int j = 0; j < kMaxK - 1; ++j) {
    const int kj = j < r ? s.kernels[j] : 0;
    widest = max(widest, kj);
#pragma unroll
    for (int tau = 0; tau < kMaxTap; ++tau) {
      w[j][tau] = tau < kj ? P.conv_weight[j][static_cast<long>(tau) * C + ch] : 0.f;
    }
  }
#pragma unroll
  for (int tau = 0; tau < kMaxTap; ++tau) ow[tau] = 0.f;  // out[t'] = 0 for t' < 0
  const long base = static_cast<long>(b) * T;
  const int start = max(0, t0 - (widest - 1));
  // Two tokens of look-ahead on the loads (a walk is one dependent chain per thread).
  float oa = ld(out + (base + start) * C + ch);
  float ob = start + 1 < t1 ? ld(out + (base + start + 1) * C + ch) : 0.f;
  for (int t = start; t < t1; ++t) {
    const long tok = base + t;
#pragma unroll
    for (int tau = kMaxTap - 1; tau > 0; --tau) ow[tau] = ow[tau - 1];
    ow[0] = oa;
    oa = ob;
    if (t + 2 < t1) ob = ld(out + (tok + 2) * C + ch);
    if (t < t0) continue;
#pragma unroll
    for (int j = 0; j < kMaxK - 1; ++j) {
      if (j >= r) continue;
      float g = 0.f;
#pragma unroll
      for (int tau = 0; tau < kMaxTap; ++tau) g += w[j][tau] * ow[tau];  // tau order, as spec
      c.dg[(tok * r + j) * C + ch] = g;
    }
  }
}

// One block per token: modified Gram-Schmidt of the conv outputs (c.dg) against out and each
// other, with block reductions. Writes v_1..v_r (bf16) and the coefficients / squared norms
// the backward needs to rebuild the history without storing it.
__global__ void __launch_bounds__(kThreads)
    gram_schmidt_kernel(XhcShape s, const bf16_t* __restrict__ out, XhcDevCache c) {
  extern __shared__ float v[];  // (K, C)
  const long tok = blockIdx.x;
  const int C = s.C, r = s.r;
  for (int ch = threadIdx.x; ch < C; ch += kThreads) {
    v[ch] = ld(out + tok * C + ch);
    for (int j = 0; j < r; ++j) v[(j + 1) * C + ch] = c.dg[(tok * r + j) * C + ch];
  }
  float* gs = c.gs + tok * (r * r + r);
  if (s.gram_schmidt) {
    // Modified Gram-Schmidt with one block reduction per component instead of one per inner
    // product: the updated g's product with v_i is <g_j, v_i> - sum_{i'<i} coef_i' <v_i', v_i>,
    // so step j reduces <g_j, v_i> and <v_{j-1}, v_i> (i < j) together and takes the
    // coefficients from them and the Gram entries of the earlier steps.
    constexpr int kR = kMaxK - 1;
    __shared__ float gram[kR][kR];  // <v_a, v_b>, + eps on the diagonal
    __shared__ float wred[kThreads / 32][2 * kR], tot[2 * kR], coef[kR];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int j = 1; j <= r; ++j) {
      float acc[2 * kR];  // [0, kR): <g_j, v_i>; [kR, 2 kR): <v_{j-1}, v_i>
#pragma unroll
      for (int q = 0; q < 2 * kR; ++q) acc[q] = 0.f;
      for (int ch = threadIdx.x; ch < C; ch += kThreads) {
        const float g = v[j * C + ch], vl = v[(j - 1) * C + ch];
#pragma unroll
        for (int i = 0; i < kR; ++i) {
          if (i >= j) continue;
          const float vi = v[i * C + ch];
          acc[i] += g * vi;
          acc[kR + i] += vl * vi;
        }
      }
#pragma unroll
      for (int q = 0; q < 2 * kR; ++q) {
        const float t = warp_sum(acc[q]);
        if (lane == 0) wred[warp][q] = t;
      }
      __syncthreads();
      if (threadIdx.x < 2 * kR) {
        float t = 0.f;
        for (int w = 0; w < kThreads / 32; ++w) t += wred[w][threadIdx.x];
        tot[threadIdx.x] = t;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        for (int i = 0; i < j; ++i) gram[j - 1][i] = gram[i][j - 1] = tot[kR + i];
        gram[j - 1][j - 1] += 1e-6f;
        gs[r * r + j - 1] = gram[j - 1][j - 1];
        for (int i = 0; i < j; ++i) {
          float a = tot[i];
          for (int i2 = 0; i2 < i; ++i2) a -= coef[i2] * gram[i2][i];
          coef[i] = a / gram[i][i];
          gs[(j - 1) * r + i] = coef[i];
        }
      }
      __syncthreads();
      for (int ch = threadIdx.x; ch < C; ch += kThreads) {
        float g = v[j * C + ch];
        for (int i = 0; i < j; ++i) g -= coef[i] * v[i * C + ch];  // in order, as MGS
        v[j * C + ch] = g;
      }
      // The next step's reduction reads only this thread's own channels of v_j before its
      // first barrier, and tot / coef are rewritten only after that barrier.
    }
  }
  for (int j = 1; j <= r; ++j) {
    for (int ch = threadIdx.x; ch < C; ch += kThreads) {
      st(c.aug + (tok * r + j - 1) * C + ch, v[j * C + ch]);
    }
  }
}

// One block per token: X[idx_j] += p_j sum_q Hpost[j][q] aug_q, aug_0 = out.
template <int K, int V>
__global__ void __launch_bounds__(kThreads)
    post_kernel(XhcShape s, const bf16_t* __restrict__ out, bf16_t* X, XhcDevCache c) {
  __shared__ float hp[kMaxActive * K], p[kMaxActive];
  __shared__ int idx[kMaxActive];
  const long tok = blockIdx.x;
  const int k = s.k, C = s.C;
  if (threadIdx.x < k * K) hp[threadIdx.x] = c.hpost[tok * k * K + threadIdx.x];
  if (threadIdx.x < k) {
    idx[threadIdx.x] = c.idx[tok * k + threadIdx.x];
    p[threadIdx.x] = c.p[tok * k + threadIdx.x];
  }
  __syncthreads();
  bf16_t* x = X + tok * s.D();
  for (int c0 = threadIdx.x * V; c0 < C; c0 += kThreads * V) {
    float a[K][V], xv[V];
    load_v<V>(out + tok * C + c0, a[0]);
#pragma unroll
    for (int q = 1; q < K; ++q) load_v<V>(c.aug + (tok * (K - 1) + q - 1) * C + c0, a[q]);
    for (int j = 0; j < k; ++j) {
      bf16_t* xj = x + static_cast<long>(idx[j]) * C + c0;
      load_v<V>(xj, xv);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        float w = 0.f;
#pragma unroll
        for (int q = 0; q < K; ++q) w += hp[j * K + q] * a[q][e];
        xv[e] += p[j] * w;
      }
      store_v<V>(xj, xv);
    }
  }
}

template <int K>
int LaunchPost(const XhcShape& s, const bf16_t* out, bf16_t* X, XhcDevCache* c, cudaStream_t st) {
  const long n = s.tokens();
  if (s.C % 8 == 0) {
    post_kernel<K, 8><<<n, kThreads, 0, st>>>(s, out, X, *c);
  } else {
    post_kernel<K, 1><<<n, kThreads, 0, st>>>(s, out, X, *c);
  }
  XHC_LAUNCH_CHECK();
  return 0;
}

size_t Align(size_t b) { return (b + 255) & ~size_t{255}; }

}  // namespace

int XhcCheckShape(const XhcShape& s) {
  const bool ok = s.B >= 1 && s.T >= 1 && s.C >= 1 && s.N >= 1 && s.N <= kMaxStreams && s.k >= 1 &&
                  s.k <= kMaxActive && s.k <= s.N && s.m >= 0 && s.m <= s.k && s.r >= 0 &&
                  s.K == s.r + 1 && s.K <= kMaxK && s.Q() <= kMaxRows && s.sinkhorn_iters >= 0 &&
                  s.sinkhorn_iters <= 64 && (s.has_router || s.k == s.N);
  if (!ok) return kXhcErrInvalidArgument;
  for (int j = 0; j < s.r; ++j) {
    if (s.kernels[j] < 1 || s.kernels[j] > kMaxTap) return kXhcErrInvalidArgument;
  }
  return 0;
}

// Sizes of the cache arrays in carve order.
static void CacheSizes(const XhcShape& s, size_t* sz) {
  const size_t n = s.tokens(), N = s.N, k = s.k, C = s.C, r = s.r, Q = s.Q();
  const size_t coef_cols = std::max<size_t>(2 * N, Q);
  const size_t f = sizeof(float), h = sizeof(bf16_t);
  size_t i = 0;
  sz[i++] = n * k * sizeof(int);                                 // idx
  sz[i++] = n * k * f;                                           // p
  sz[i++] = n * N * f;                                           // s
  sz[i++] = n * N * f;                                           // hpre
  sz[i++] = n * 2 * N * f;                                       // proj
  sz[i++] = n * 4 * f;                                           // stats
  sz[i++] = n * Q * f;                                           // map_raw
  sz[i++] = n * k * k * f;                                       // hres
  sz[i++] = n * k * s.K * f;                                     // hpost
  sz[i++] = N * f;                                               // wsum
  sz[i++] = n * r * C * h;                                       // aug
  sz[i++] = n * (r * r + r) * f;                                 // gs
  sz[i++] = n * 2 * N * f;                                       // dz_proj
  sz[i++] = n * Q * f;                                           // dz_map
  sz[i++] = n * 4 * f;                                           // corr
  sz[i++] = n * r * C * f;                                       // dg
  sz[i++] = n * C * f;                                           // dout_f
  sz[i++] = n * k * C * h;                                       // xa
  sz[i++] = n * coef_cols * h;                                   // coef
  sz[i++] = std::max<size_t>(6 * N * N * C, 2 * Q * k * C) * h;  // wsplit
  sz[i++] = n * std::max<size_t>(4 * N, 2 * Q) * f;              // gemm_out
  size_t taps = 0;
  for (int j = 0; j < s.r; ++j) taps += s.kernels[j];
  sz[i++] = size_t(s.B) * ((s.T + kConvChunk - 1) / kConvChunk) * taps * C * f;  // conv_part
}
constexpr int kCacheArrays = 22;

size_t XhcCacheBytes(const XhcShape& s) {
  size_t sz[kCacheArrays], total = 0;
  CacheSizes(s, sz);
  for (size_t b : sz) total += Align(b == 0 ? 1 : b);
  return total;
}

int XhcCacheCarve(const XhcShape& s, void* base, XhcDevCache* c) {
  XHC_TRY(XhcCheckShape(s));
  size_t sz[kCacheArrays];
  CacheSizes(s, sz);
  char* p = static_cast<char*>(base);
  void* slot[kCacheArrays];
  for (int i = 0; i < kCacheArrays; ++i) {
    slot[i] = p;
    p += Align(sz[i] == 0 ? 1 : sz[i]);
  }
  int i = 0;
  c->idx = static_cast<int*>(slot[i++]);
  c->p = static_cast<float*>(slot[i++]);
  c->s = static_cast<float*>(slot[i++]);
  c->hpre = static_cast<float*>(slot[i++]);
  c->proj = static_cast<float*>(slot[i++]);
  c->stats = static_cast<float*>(slot[i++]);
  c->map_raw = static_cast<float*>(slot[i++]);
  c->hres = static_cast<float*>(slot[i++]);
  c->hpost = static_cast<float*>(slot[i++]);
  c->wsum = static_cast<float*>(slot[i++]);
  c->aug = static_cast<bf16_t*>(slot[i++]);
  c->gs = static_cast<float*>(slot[i++]);
  c->dz_proj = static_cast<float*>(slot[i++]);
  c->dz_map = static_cast<float*>(slot[i++]);
  c->corr = static_cast<float*>(slot[i++]);
  c->dg = static_cast<float*>(slot[i++]);
  c->dout_f = static_cast<float*>(slot[i++]);
  c->xa = static_cast<bf16_t*>(slot[i++]);
  c->coef = static_cast<bf16_t*>(slot[i++]);
  c->wsplit = static_cast<bf16_t*>(slot[i++]);
  c->gemm_out = static_cast<float*>(slot[i++]);
  c->conv_part = static_cast<float*>(slot[i++]);
  return 0;
}

int XhcPreLaunch(const XhcShape& s, const XhcDevParams& P, bf16_t* X, bf16_t* u, XhcDevCache* c,
                 void* cublas, void* stream) {
  XHC_TRY(XhcCheckShape(s));
  cudaStream_t st = as_stream(stream);
  cublasHandle_t h = static_cast<cublasHandle_t>(cublas);
  const long n = s.tokens();
  const int N = s.N, D = s.D(), Q = s.Q(), Da = s.Da(), kk = s.k * s.k;
  const int per_token = ceil_div(n, 128);
  if (s.has_router) {
    row_sum_kernel<<<N, kThreads, 0, st>>>(P.router_weight, D, c->wsum);
    XHC_LAUNCH_CHECK();
  }
  // Stage 1: statistics, then router + read-map projections of the full state.
  if (D % 8 == 0) {
    state_stats_kernel<8><<<n, kThreads, 0, st>>>(s, X, *c);
  } else {
    state_stats_kernel<1><<<n, kThreads, 0, st>>>(s, X, *c);
  }
  XHC_LAUNCH_CHECK();
  split_rows_kernel<2><<<std::min(ceil_div(2L * N * D, kThreads), 4096), kThreads, 0, st>>>(
      s.has_router ? P.router_weight : nullptr, N, P.pre_weight, N, D, c->wsplit);
  XHC_LAUNCH_CHECK();
  XHC_TRY(SplitGemm(h, st, X, D, c->wsplit, 2 * N, D, n, c->gemm_out));
  maps_kernel<<<per_token, 128, 0, st>>>(s, P, c->gemm_out, *c);
  XHC_LAUNCH_CHECK();
  // Stage 2: the active streams (before the mixing), res + post projections, Sinkhorn.
  if (s.C % 8 == 0) {
    gather_active_kernel<8><<<n, kThreads, 0, st>>>(s, X, *c);
  } else {
    gather_active_kernel<1><<<n, kThreads, 0, st>>>(s, X, *c);
  }
  XHC_LAUNCH_CHECK();
  split_rows_kernel<2><<<std::min(ceil_div(long(Q) * Da, kThreads), 4096), kThreads, 0, st>>>(
      P.res_weight, kk, P.post_weight, Q - kk, Da, c->wsplit);
  XHC_LAUNCH_CHECK();
  XHC_TRY(SplitGemm(h, st, c->xa, Da, c->wsplit, Q, Da, n, c->gemm_out));
  sinkhorn_maps_kernel<<<per_token, 128, 0, st>>>(s, P, c->gemm_out, *c);
  XHC_LAUNCH_CHECK();
  if (s.C % 8 == 0) {
    read_mix_kernel<8><<<n, kThreads, 0, st>>>(s, X, u, *c);
  } else {
    read_mix_kernel<1><<<n, kThreads, 0, st>>>(s, X, u, *c);
  }
  XHC_LAUNCH_CHECK();
  return 0;
}

int XhcPostLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* out, bf16_t* X,
                  XhcDevCache* c, void* stream) {
  XHC_TRY(XhcCheckShape(s));
  cudaStream_t st = as_stream(stream);
  if (s.r > 0) {
    const size_t smem = sizeof(float) * s.K * s.C;
    conv_forward_kernel<<<dim3(ceil_div(s.C, 128), s.B * ceil_div(s.T, kConvChunk)), 128, 0, st>>>(
        s, P, out, *c);
    XHC_LAUNCH_CHECK();
    XHC_CUDA_TRY(cudaFuncSetAttribute(
        gram_schmidt_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    gram_schmidt_kernel<<<s.tokens(), kThreads, smem, st>>>(s, out, *c);
    XHC_LAUNCH_CHECK();
  }
  switch (s.K) {
    case 1: return LaunchPost<1>(s, out, X, c, st);
    case 2: return LaunchPost<2>(s, out, X, c, st);
    case 3: return LaunchPost<3>(s, out, X, c, st);
    case 4: return LaunchPost<4>(s, out, X, c, st);
    default: return kXhcErrInvalidArgument;
  }
}

}  // namespace xhc::cuda
