// Optimized expand (spec 2.2) and head reduce (spec 2.4). The head's projection runs on the
// raw state with the RMS factor applied afterwards, like the sublayer's read map, through the
// same skinny kernels (N = 16 output rows of N*C: OpenBLAS's sgemm ran these shapes at a
// fraction of its rate: model_bench --phases showed head_bwd 5x vanilla's at N = 16).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/gemm_util.h"
#include "kernels/cpu/xhc/sinkhorn.h"
#include "kernels/cpu/xhc/skinny_gemm.h"
#include "kernels/cpu/xhc/xhc_ops.h"

namespace xhc::kernels {

void ExpandForward(int n, int N, int C, const float* e, float* X) {
#pragma omp parallel for schedule(static)
  for (int tok = 0; tok < n; ++tok)
    for (int i = 0; i < N; ++i)
      std::memcpy(X + (static_cast<size_t>(tok) * N + i) * C, e + static_cast<size_t>(tok) * C,
                  sizeof(float) * C);
}

void ExpandBackward(int n, int N, int C, const float* dX, float* de) {
#pragma omp parallel for schedule(static)
  for (int tok = 0; tok < n; ++tok) {
    float* __restrict dst = de + static_cast<size_t>(tok) * C;
    std::memset(dst, 0, sizeof(float) * C);
    for (int i = 0; i < N; ++i)
      cpu::Axpy(C, 1.0f, dX + (static_cast<size_t>(tok) * N + i) * C, dst);
  }
}

namespace {

// Token `tok` of the head's forward, its projection already in cache->proj: RMS factor, read
// map, y[tok] = sum_i h_i X_i.
XHC_CLONES void HeadReduceToken(const HeadParams& P, int N, int C, const float* X, int tok,
                                float* y, HeadCache* cache) {
  const int D = N * C;
  const float* x = X + static_cast<size_t>(tok) * D;
  double sum, sumsq;
  cpu::SumSq(D, x, &sum, &sumsq);
  const float r = static_cast<float>(1.0 / std::sqrt(sumsq / D + kNormEps));
  cache->rstd[tok] = r;
  float* __restrict yt = y + static_cast<size_t>(tok) * C;
  std::memset(yt, 0, sizeof(float) * C);
  for (int i = 0; i < N; ++i) {
    const size_t q = static_cast<size_t>(tok) * N + i;
    cache->h[q] = Sigmoid(P.alpha[0] * r * cache->proj[q] + P.bias[i]);
    cpu::Axpy(C, cache->h[q], x + i * C, yt);
  }
}

// Token `tok` of the head's input backward: its read map's dz (stashed for the weight pass),
// the projection's left factor zc, and dX[tok] but the projection term.
XHC_CLONES void HeadBackwardToken(const HeadParams& P, int N, int C, const float* X,
                                  const float* dy, int tok, HeadCache* cache, float* zc,
                                  float* dX) {
  const int D = N * C;
  const float* x = X + static_cast<size_t>(tok) * D;
  const float* dyt = dy + static_cast<size_t>(tok) * C;
  const float r = cache->rstd[tok];
  float a = 0;
  for (int i = 0; i < N; ++i) {
    const size_t q = static_cast<size_t>(tok) * N + i;
    const float h = cache->h[q];
    cache->dz[q] = cpu::Dot(C, dyt, x + i * C) * h * (1.0f - h);
    zc[q] = cache->dz[q] * P.alpha[0] * r;
    a += zc[q] * cache->proj[q];
  }
  a *= r * r / D;  // rms backward: r^2 / D * sum dz (z - b), z - b = alpha r proj
  for (int i = 0; i < N; ++i) {
    const float h = cache->h[static_cast<size_t>(tok) * N + i];
    float* __restrict dst = dX + static_cast<size_t>(tok) * D + i * C;
    const float* __restrict xi = x + i * C;
    for (int c = 0; c < C; ++c) dst[c] = h * dyt[c] - a * xi[c];
  }
}

}  // namespace

absl::Status HeadReduceForward(const HeadParams& P, int n, int N, int C, const float* X, float* y,
                               HeadCache* cache) {
  if (n <= 0 || N <= 0 || C <= 0 || !X || !y || !cache || !P.weight || !P.bias || !P.alpha) {
    return absl::InvalidArgumentError("HeadReduceForward: bad shape or null buffer");
  }
  const int D = N * C;
  cache->rstd.resize(n);
  cache->proj.resize(static_cast<size_t>(n) * N);
  cache->h.resize(static_cast<size_t>(n) * N);
  cache->dz.resize(static_cast<size_t>(n) * N);
  const cpu::SkinnyWeights w = cpu::PackForDotRows(N, D, P.weight, D);
  // One pass over the state: each block of kMaxTokens tokens (512 KiB at N*C = 8192) is
  // projected, then reduced while it is still in L2.
  const int num_blocks = (n + cpu::kMaxTokens - 1) / cpu::kMaxTokens;
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int t0 = blk * cpu::kMaxTokens, nt = std::min(cpu::kMaxTokens, n - t0);
    cpu::DotRows(nt, w, X + static_cast<size_t>(t0) * D, D,
                 cache->proj.data() + static_cast<size_t>(t0) * N, N);
    for (int tok = t0; tok < t0 + nt; ++tok) HeadReduceToken(P, N, C, X, tok, y, cache);
  }
  return absl::OkStatus();
}

absl::Status HeadReduceBackwardInput(const HeadParams& P, int n, int N, int C, const float* X,
                                     const float* dy, HeadCache* cache, float* dX) {
  if (!cache || cache->h.size() != static_cast<size_t>(n) * N || !X || !dy || !dX) {
    return absl::InvalidArgumentError("HeadReduceBackwardInput: cache / shape mismatch");
  }
  const int D = N * C;
  std::vector<float> zc(static_cast<size_t>(n) * N);
  const cpu::SkinnyWeights w = cpu::PackForAxpyRows(N, D, P.weight, D);
  // A block of kMaxTokens tokens at a time, both terms, so the block's dX rows (512 KiB at
  // N*C = 8192) are still in L2 when the projection term is added, instead of a second sweep
  // over the whole dX (the gain was below model_bench's noise: docs/design/fused-xhc-sublayer.md).
  const int num_blocks = (n + cpu::kMaxTokens - 1) / cpu::kMaxTokens;
#pragma omp parallel for schedule(dynamic, 1)
  for (int blk = 0; blk < num_blocks; ++blk) {
    const int t0 = blk * cpu::kMaxTokens, nt = std::min(cpu::kMaxTokens, n - t0);
    for (int tok = t0; tok < t0 + nt; ++tok) {
      HeadBackwardToken(P, N, C, X, dy, tok, cache, zc.data(), dX);
    }
    // dX += zc (nt, N) . W (N, D)
    cpu::AxpyRows(nt, w, zc.data() + static_cast<size_t>(t0) * N, N,
                  dX + static_cast<size_t>(t0) * D, D, /*accumulate=*/true);
  }
  return absl::OkStatus();
}

absl::Status HeadReduceBackwardWeights(const HeadParams& P, int n, int N, int C, const float* X,
                                       const HeadCache& cache, const HeadGrads& G) {
  if (cache.dz.size() != static_cast<size_t>(n) * N || !G.weight || !G.bias || !G.alpha || !X) {
    return absl::InvalidArgumentError("HeadReduceBackwardWeights: cache / grads mismatch");
  }
  const int D = N * C;
  std::vector<float> A(static_cast<size_t>(n) * N);
  float galpha = 0;
  for (int tok = 0; tok < n; ++tok) {
    for (int i = 0; i < N; ++i) {
      const size_t q = static_cast<size_t>(tok) * N + i;
      A[q] = cache.dz[q] * P.alpha[0] * cache.rstd[tok];
      galpha += cache.dz[q] * cache.rstd[tok] * cache.proj[q];
    }
  }
  // weight (N, D) += A^T (N, n) . X (n, D), through the sublayers' weight-gradient kernel
  // (AtXColumns: per element one running sum over the tokens in order, whatever the thread
  // count); OpenBLAS ran this 16-row shape at about half its rate
  // (docs/design/fused-xhc-sublayer.md).
  std::vector<float> tmp(static_cast<size_t>(N) * D);
  cpu::AtXColumns(n, N, D, A.data(), X, D, tmp.data());
  for (size_t q = 0; q < tmp.size(); ++q) G.weight[q] += tmp[q];
  for (int i = 0; i < N; ++i) {
    float b = 0;
    for (int tok = 0; tok < n; ++tok) b += cache.dz[static_cast<size_t>(tok) * N + i];
    G.bias[i] += b;
  }
  G.alpha[0] += galpha;
  return absl::OkStatus();
}

}  // namespace xhc::kernels
