// Weight gradients (XhcBackwardWeightsLaunch), accumulated into G: the two big projections
// as cuBLAS bf16 GEMMs with float32 accumulation into the float32 gradients; biases, alphas
// and the LayerNorm mean correction as deterministic token reductions; the convolution
// weights from per-chunk walks reduced in chunk order.

#include <cublas_v2.h>

#include "kernels/cuda/cuda_common.cuh"

namespace xhc::cuda {
namespace {

constexpr int kThreads = 256;

// The convolution weights' gradient with each thread walking kConvChunk tokens of one
// channel of one sequence, the taps it needs held in registers (a sliding window), so every
// dg / out value is read once per branch instead of once per tap. kMaxTap (16) bounds the
// widest kernel (XhcCheckShape).

// Per chunk: part[chunk][tap][ch] = sum_{t in chunk, t >= tau} dg_j[t][ch] out[t - tau][ch]
// (tap = offset of j's taps + tau); the window ow[tau] = out[t - tau] is filled by walking
// from widest - 1 tokens before the chunk. conv_weight_reduce_kernel adds the chunks in order.
__global__ void conv_weight_part_kernel(XhcShape s, const bf16_t* __restrict__ out, XhcDevCache c,
                                        int taps) {
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
    for (int j = 0; j < kMaxK - 1; ++j)
      g[j] = j < r && tt >= t0 ? c.dg[(tok * r + j) * C + ch] : 0.f;
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
      for (int tau = 0; tau < kMaxTap; ++tau)
        acc[j][tau] += cur[j] * ow[tau];  // ow = 0 before t = 0
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
  e = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_T, L, rows, static_cast<int>(n), &one, A, CUDA_R_16BF,
                   L, coef, CUDA_R_16BF, ldc, &one, G, CUDA_R_32F, L, CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT);
  return e == CUBLAS_STATUS_SUCCESS ? 0 : kXhcErrCublasBase + static_cast<int>(e);
}

}  // namespace

int XhcBackwardWeightsLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                             const bf16_t* out, XhcDevCache* c, const XhcDevGrads& G, void* cublas,
                             void* stream) {
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
    row_correct_kernel<<<dim3(ceil_div(s.D(), 1024 * 4), N), 1024, 0, st>>>(G.router_weight, rowc,
                                                                            s.D());
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
