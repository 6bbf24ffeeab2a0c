// Forward kernels of the xHC sublayer (model-spec 4.2), the paper's two-stage fused design:
//   mapping generation   proj_kernel<false>: one pass over each token's N*C bf16 state giving
//                        LayerNorm + RMS statistics and the router + read-map projections;
//                        the normalisations are applied AFTER the projection (ln(x).w =
//                        rstd_ln (x.w - mean sum(w)), rms(x).w = rstd x.w), then the
//                        sigmoids and fixed + top-(k-m) selection, all in the epilogue;
//                        proj_kernel<true>: gather of the active streams with their RMS and
//                        the joint res/post projection, then Sinkhorn per token.
//                        Weights are float32 and reused by kTM tokens per block (the
//                        projection is a thin GEMM: weights come from L2 once per 16 tokens).
//   mapping application  read_mix_kernel: dense read u = sum_i hpre_i X_i fused with the
//                        active mixing Hres . Xa (written in place into X's active streams);
//                        conv_gs_kernel: the r causal depthwise convolutions + Gram-Schmidt;
//                        post_kernel<K>: X[idx_j] += p_j sum_r Hpost[j][r] aug_r, consuming
//                        out and the conv outputs directly (no stacked (n,K,C) tensor).

#include <cstdio>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTM = 16;        // tokens per projection block
constexpr int kTD = 64;        // reduction tile; kTM * kTD == 4 * kThreads
constexpr int kMaxRows = 96;   // 2N (N <= 32) or Q = k*k + k*K (k <= 8, K <= 4)
constexpr int kAcc = kTM * kMaxRows / kThreads;  // outputs per thread

struct ProjOut {
  float sum[kTM], sq[kTM];
};

// Rows of the projection: stage 1 (kActive = false) rows 0..N-1 router, N..2N-1 read map,
// over the full state (D = N*C); stage 2 rows 0..k*k-1 res, then k*K post, over Xa (k*C).
template <bool kActive>
__global__ void __launch_bounds__(kThreads)
    proj_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ X, XhcDevCache c) {
  __shared__ float xs[kTM][kTD];
  __shared__ float ws[kMaxRows][kTD + 1];  // +1: rows read by consecutive lanes, no conflicts
  __shared__ float proj[kTM][kMaxRows];
  __shared__ float red_sum[kTM][2], red_sq[kTM][2];
  __shared__ int sidx[kTM][kMaxActive];
  const long n = s.tokens();
  const long tok0 = static_cast<long>(blockIdx.x) * kTM;
  const int N = s.N, C = s.C, k = s.k, D = s.D();
  const int L = kActive ? s.Da() : D;           // reduction length
  const int R = kActive ? s.Q() : 2 * N;        // output rows
  const int kk = k * k;
  if (kActive) {
    for (int e = threadIdx.x; e < kTM * k; e += kThreads) {
      const int tm = e / k, j = e % k;
      sidx[tm][j] = (tok0 + tm < n) ? c.idx[(tok0 + tm) * k + j] : 0;
    }
    __syncthreads();
  }
  float acc[kAcc], psum[4], psq[4];
#pragma unroll
  for (int q = 0; q < kAcc; ++q) acc[q] = 0.f;
#pragma unroll
  for (int q = 0; q < 4; ++q) psum[q] = psq[q] = 0.f;
  for (int d0 = 0; d0 < L; d0 += kTD) {
#pragma unroll
    for (int q = 0; q < 4; ++q) {  // element el belongs to token el / kTD = tid/64 + 4q
      const int el = threadIdx.x + q * kThreads, tm = el / kTD, dd = el % kTD;
      const long tok = tok0 + tm;
      const int e = d0 + dd;
      float v = 0.f;
      if (tok < n && e < L) {
        v = kActive ? ld(X + tok * D + static_cast<long>(sidx[tm][e / C]) * C + e % C)
                    : ld(X + tok * D + e);
      }
      xs[tm][dd] = v;
      psum[q] += v;
      psq[q] += v * v;
    }
    for (int el = threadIdx.x; el < R * kTD; el += kThreads) {
      const int row = el / kTD, dd = el % kTD, e = d0 + dd;
      const float* W;
      int wr;
      if (kActive) {
        W = row < kk ? P.res_weight : P.post_weight;
        wr = row < kk ? row : row - kk;
      } else {
        W = row < N ? P.router_weight : P.pre_weight;
        wr = row < N ? row : row - N;
      }
      ws[row][dd] = (W != nullptr && e < L) ? W[static_cast<long>(wr) * L + e] : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kAcc; ++q) {
      const int o = threadIdx.x + q * kThreads;
      if (o < kTM * R) {
        const int tm = o / R, row = o % R;
        float a = 0.f;
#pragma unroll 16
        for (int dd = 0; dd < kTD; ++dd) a += xs[tm][dd] * ws[row][dd];
        acc[q] += a;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int q = 0; q < kAcc; ++q) {
    const int o = threadIdx.x + q * kThreads;
    if (o < kTM * R) proj[o / R][o % R] = acc[q];
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const float a = warp_sum(psum[q]), b = warp_sum(psq[q]);
    if ((threadIdx.x & 31) == 0) {
      const int tm = threadIdx.x / kTD + 4 * q, half = (threadIdx.x / 32) & 1;
      red_sum[tm][half] = a;
      red_sq[tm][half] = b;
    }
  }
  __syncthreads();
  const int tm = threadIdx.x;
  if (tm >= kTM || tok0 + tm >= n) return;
  const long tok = tok0 + tm;
  const float sum = red_sum[tm][0] + red_sum[tm][1], sq = red_sq[tm][0] + red_sq[tm][1];
  if (!kActive) {
    const float mean = sum / D;
    const float var = fmaxf(sq / D - mean * mean, 0.f);  // state is near zero-mean
    const float rstd_ln = rsqrtf(var + 1e-6f), rstd = rsqrtf(sq / D + 1e-6f);
    float* st4 = c.stats + tok * 4;
    st4[0] = mean, st4[1] = rstd_ln, st4[2] = rstd;
    float sv[kMaxStreams];
    for (int i = 0; i < N; ++i) {
      float si = 0.f, pr = 0.f;
      if (s.has_router) {
        pr = proj[tm][i];
        si = sigmoidf_(rstd_ln * (pr - mean * c.wsum[i]) + P.router_bias[i]);
      }
      sv[i] = si;
      c.s[tok * N + i] = si;
      c.proj[tok * 2 * N + i] = pr;
      const float pp = proj[tm][N + i];
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
    return;
  }
  const int Q = R, K = s.K;
  const float rstd_a = rsqrtf(sq / L + 1e-6f);
  c.stats[tok * 4 + 3] = rstd_a;
  float z[kMaxActive * kMaxActive], h[kMaxActive * kMaxActive];
  for (int q = 0; q < Q; ++q) c.map_raw[tok * Q + q] = proj[tm][q];
  for (int q = 0; q < kk; ++q) z[q] = P.res_alpha[0] * rstd_a * proj[tm][q] + P.res_bias[q];
  sinkhorn_forward(k, s.sinkhorn_iters, z, h);
  for (int q = 0; q < kk; ++q) c.hres[tok * kk + q] = h[q];
  for (int q = 0; q < k * K; ++q) {
    const float zp = P.post_alpha[0] * rstd_a * proj[tm][kk + q] + P.post_bias[q];
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

// One block per token: g_j[t] = sum_{tau < kappa_j, tau <= t} w_j[tau] out[t - tau] for all
// r kernels in one pass (neighbouring tokens' blocks share the out rows through L1/L2),
// then modified Gram-Schmidt with block reductions. Writes v_1..v_r (bf16) and the
// coefficients / squared norms the backward needs to rebuild the history without storing it.
__global__ void __launch_bounds__(kThreads)
    conv_gs_kernel(XhcShape s, XhcDevParams P, const bf16_t* __restrict__ out, XhcDevCache c) {
  extern __shared__ float v[];  // (K, C)
  __shared__ float red[32];
  const long tok = blockIdx.x;
  const int t = static_cast<int>(tok % s.T), C = s.C, r = s.r;
  for (int ch = threadIdx.x; ch < C; ch += kThreads) {
    v[ch] = ld(out + tok * C + ch);
    for (int j = 0; j < r; ++j) {
      float g = 0.f;
      const float* w = P.conv_weight[j];
      for (int tau = 0; tau < s.kernels[j] && tau <= t; ++tau) {
        g += w[static_cast<long>(tau) * C + ch] * ld(out + (tok - tau) * C + ch);
      }
      v[(j + 1) * C + ch] = g;
    }
  }
  float* gs = c.gs + tok * (r * r + r);
  if (s.gram_schmidt) {
    for (int j = 1; j <= r; ++j) {
      {  // |v_{j-1}|^2 + eps, final now
        float a = 0.f;
        for (int ch = threadIdx.x; ch < C; ch += kThreads) a += v[(j - 1) * C + ch] * v[(j - 1) * C + ch];
        a = block_sum(a, red) + 1e-6f;
        if (threadIdx.x == 0) gs[r * r + j - 1] = a;
      }
      for (int i = 0; i < j; ++i) {
        float a = 0.f;
        for (int ch = threadIdx.x; ch < C; ch += kThreads) a += v[j * C + ch] * v[i * C + ch];
        const float coef = block_sum(a, red) / gs[r * r + i];
        for (int ch = threadIdx.x; ch < C; ch += kThreads) v[j * C + ch] -= coef * v[i * C + ch];
        if (threadIdx.x == 0) gs[(j - 1) * r + i] = coef;
        __syncthreads();  // gs[] read by all threads next round
      }
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
  const bool ok = s.B >= 1 && s.T >= 1 && s.C >= 1 && s.N >= 1 && s.N <= kMaxStreams &&
                  s.k >= 1 && s.k <= kMaxActive && s.k <= s.N && s.m >= 0 && s.m <= s.k &&
                  s.r >= 0 && s.K == s.r + 1 && s.K <= kMaxK && s.Q() <= kMaxRows &&
                  s.sinkhorn_iters >= 0 && s.sinkhorn_iters <= 64 &&
                  (s.has_router || s.k == s.N);
  if (!ok) return kXhcErrInvalidArgument;
  for (int j = 0; j < s.r; ++j) {
    if (s.kernels[j] < 1) return kXhcErrInvalidArgument;
  }
  return 0;
}

// Sizes of the cache arrays in carve order.
static void CacheSizes(const XhcShape& s, size_t* sz) {
  const size_t n = s.tokens(), N = s.N, k = s.k, C = s.C, r = s.r, Q = s.Q();
  const size_t coef_cols = std::max<size_t>(2 * N, Q);
  const size_t f = sizeof(float), h = sizeof(bf16_t);
  size_t i = 0;
  sz[i++] = n * k * sizeof(int);  // idx
  sz[i++] = n * k * f;            // p
  sz[i++] = n * N * f;            // s
  sz[i++] = n * N * f;            // hpre
  sz[i++] = n * 2 * N * f;        // proj
  sz[i++] = n * 4 * f;            // stats
  sz[i++] = n * Q * f;            // map_raw
  sz[i++] = n * k * k * f;        // hres
  sz[i++] = n * k * s.K * f;      // hpost
  sz[i++] = N * f;                // wsum
  sz[i++] = n * r * C * h;        // aug
  sz[i++] = n * (r * r + r) * f;  // gs
  sz[i++] = n * 2 * N * f;        // dz_proj
  sz[i++] = n * Q * f;            // dz_map
  sz[i++] = n * 4 * f;            // corr
  sz[i++] = n * r * C * f;        // dg
  sz[i++] = n * C * f;            // dout_f
  sz[i++] = n * k * C * h;        // xa
  sz[i++] = n * coef_cols * h;    // coef
}
constexpr int kCacheArrays = 19;

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
  return 0;
}

int XhcPreLaunch(const XhcShape& s, const XhcDevParams& P, bf16_t* X, bf16_t* u,
                 XhcDevCache* c, void* stream) {
  XHC_TRY(XhcCheckShape(s));
  cudaStream_t st = as_stream(stream);
  const long n = s.tokens();
  if (s.has_router) {
    row_sum_kernel<<<s.N, kThreads, 0, st>>>(P.router_weight, s.D(), c->wsum);
    XHC_LAUNCH_CHECK();
  }
  const int blocks = ceil_div(n, kTM);
  proj_kernel<false><<<blocks, kThreads, 0, st>>>(s, P, X, *c);
  XHC_LAUNCH_CHECK();
  proj_kernel<true><<<blocks, kThreads, 0, st>>>(s, P, X, *c);
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
    XHC_CUDA_TRY(cudaFuncSetAttribute(conv_gs_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
    conv_gs_kernel<<<s.tokens(), kThreads, smem, st>>>(s, P, out, *c);
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
