#include "kernels/cpu/xhc/hc_ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/xhc/cpu_util.h"
#include "kernels/cpu/xhc/gemm_util.h"

namespace xhc::kernels::hc {
namespace {

// [pre; post; res rows 0..N-1], (N+2, C): the rows every stream's rms is dotted with.
std::vector<float> StackMapRows(const XhcDims& d, const XhcParams& P) {
  const size_t C = d.C;
  std::vector<float> w((d.N + 2) * C);
  std::memcpy(w.data(), P.pre_weight, sizeof(float) * C);
  std::memcpy(w.data() + C, P.post_weight, sizeof(float) * C);
  std::memcpy(w.data() + 2 * C, P.res_weight, sizeof(float) * d.N * C);
  return w;
}

float MapAlpha(const XhcParams& P, int col) {
  return col == 0 ? P.pre_alpha[0] : col == 1 ? P.post_alpha[0] : P.res_alpha[0];
}

XHC_CLONES void TokenPre(const XhcDims& d, const XhcParams& P, const float* wst, const float* x,
                         size_t tok, float* u, XhcCache* cache) {
  const int N = d.N, C = d.C, W = N + 2;
  float* dots = cache->hc_dots.data() + tok * N * W;
  float* hpre = cache->hpre.data() + tok * N;
  float* hpost = cache->hpost.data() + tok * N;
  float* hres = cache->hres.data() + tok * N * N;
  for (int i = 0; i < N; ++i) {
    double sum, sumsq;
    cpu::SumSq(C, x + i * C, &sum, &sumsq);
    const float r = static_cast<float>(1.0 / std::sqrt(sumsq / C + kNormEps));
    cache->hc_rstd[tok * N + i] = r;
    cpu::MultiDot(C, x + i * C, W, wst, C, dots + i * W);  // raw <x_i, w_col>
    for (int col = 0; col < W; ++col) dots[i * W + col] *= r;
  }
  for (int i = 0; i < N; ++i) {
    hpre[i] = P.pre_alpha[0] * std::tanh(dots[i * W]) + P.pre_bias[i];
    hpost[i] = P.post_alpha[0] * std::tanh(dots[i * W + 1]) + P.post_bias[i];
    for (int a = 0; a < N; ++a) {
      hres[a * N + i] = P.res_alpha[0] * std::tanh(dots[i * W + 2 + a]) + P.res_bias[a * N + i];
    }
  }
  cpu::WeightedSum(C, N, hpre, x, C, u + tok * C);
  std::memcpy(cache->xa.data() + tok * N * C, x, sizeof(float) * N * C);
}

XHC_CLONES void TokenPost(const XhcDims& d, const float* out, float* x, size_t tok,
                          XhcCache* cache) {
  const int N = d.N, C = d.C;
  const float* xa = cache->xa.data() + tok * N * C;
  const float* hres = cache->hres.data() + tok * N * N;
  const float* hpost = cache->hpost.data() + tok * N;
  const float* o = out + tok * C;
  std::memcpy(cache->aug.data() + tok * C, o, sizeof(float) * C);
  for (int a = 0; a < N; ++a) {
    cpu::WeightedSum(C, N, hres + a * N, xa, C, x + a * C);
    cpu::Axpy(C, hpost[a], o, x + a * C);
  }
}

XHC_CLONES void TokenBackwardOut(const XhcDims& d, const float* g, size_t tok, XhcCache* cache,
                                 float* d_out) {
  const int N = d.N, C = d.C, W = N + 2;
  const float* xa = cache->xa.data() + tok * N * C;
  const float* out = cache->aug.data() + tok * C;
  float* dmap = cache->hc_dmap.data() + tok * N * W;
  float dres[256];
  cpu::WeightedSum(C, N, cache->hpost.data() + tok * N, g, C, d_out + tok * C);
  for (int a = 0; a < N; ++a) {
    dmap[a * W + 1] = cpu::Dot(C, g + a * C, out);
    cpu::MultiDot(C, g + a * C, N, xa, C, dres);  // d Hres[a][i] = <g_a, X_i>
    for (int i = 0; i < N; ++i) dmap[i * W + 2 + a] = dres[i];
  }
}

XHC_CLONES void TokenBackwardInput(const XhcDims& d, const XhcParams& P, const float* wst,
                                   const float* x, const float* du, size_t tok, float* g,
                                   XhcCache* cache, float* dx) {
  const int N = d.N, C = d.C, W = N + 2;
  const float* hpre = cache->hpre.data() + tok * N;
  const float* hres = cache->hres.data() + tok * N * N;
  const float* dots = cache->hc_dots.data() + tok * N * W;
  float* dmap = cache->hc_dmap.data() + tok * N * W;
  float dpre[256], col_i[257], dz[258];
  cpu::MultiDot(C, du, N, x, C, dpre);  // d Hpre[i] = <du, X_i>
  for (int i = 0; i < N; ++i) {
    dmap[i * W] = dpre[i];
    // dx_i = Hpre_i du + sum_a Hres[a][i] g_a, then the maps' path through rms(X_i).
    col_i[0] = hpre[i];
    for (int a = 0; a < N; ++a) col_i[1 + a] = hres[a * N + i];
    float* dxi = dx + i * C;
    cpu::WeightedSum(C, 1, col_i, du, C, dxi);
    for (int a = 0; a < N; ++a) cpu::Axpy(C, col_i[1 + a], g + a * C, dxi);
    float s = 0;
    for (int col = 0; col < W; ++col) {
      const float t = std::tanh(dots[i * W + col]);
      dz[col] = dmap[i * W + col] * MapAlpha(P, col) * (1.0f - t * t);
      s += dz[col] * dots[i * W + col];  // <g~, x~> = sum_col dz <w_col, x~>
    }
    const float r = cache->hc_rstd[tok * N + i];
    // rms backward: r * (g~ - x~ <g~, x~> / C), with x~ = r x and g~ = sum_col dz w_col.
    for (int col = 0; col < W; ++col) dz[col] *= r;
    cpu::AxpyWeighted(C, W, dz, wst, C, dxi);
    cpu::Axpy(C, -r * r * s / C, x + i * C, dxi);
  }
  std::memcpy(g, dx, sizeof(float) * N * C);
}

}  // namespace

absl::Status Pre(const XhcDims& d, const XhcParams& P, int B, int T_len, const float* X, float* u,
                 XhcCache* cache) {
  const int N = d.N, D = d.D(), W = N + 2;
  const int n = B * T_len;
  cache->hc_rstd.resize(static_cast<size_t>(n) * N);
  cache->hc_dots.resize(static_cast<size_t>(n) * N * W);
  cache->hc_dmap.resize(static_cast<size_t>(n) * N * W);
  const std::vector<float> wst = StackMapRows(d, P);
#pragma omp parallel for schedule(dynamic, 16)
  for (int tok = 0; tok < n; ++tok) {
    TokenPre(d, P, wst.data(), X + static_cast<size_t>(tok) * D, tok, u, cache);
    for (int i = 0; i < N; ++i) cache->idx[tok * N + i] = i, cache->p[tok * N + i] = 1.0f;
  }
  return absl::OkStatus();
}

absl::Status Post(const XhcDims& d, const float* out, float* X, XhcCache* cache) {
  const int n = cache->B * cache->T_len, D = d.D();
#pragma omp parallel for schedule(dynamic, 16)
  for (int tok = 0; tok < n; ++tok) TokenPost(d, out, X + static_cast<size_t>(tok) * D, tok, cache);
  return absl::OkStatus();
}

absl::Status BackwardOut(const XhcDims& d, const float* dX_new, XhcCache* cache, float* d_out) {
  const int n = cache->B * cache->T_len, D = d.D();
#pragma omp parallel for schedule(dynamic, 16)
  for (int tok = 0; tok < n; ++tok) {
    TokenBackwardOut(d, dX_new + static_cast<size_t>(tok) * D, tok, cache, d_out);
  }
  return absl::OkStatus();
}

absl::Status BackwardInput(const XhcDims& d, const XhcParams& P, const float* X_in, const float* du,
                           float* dX, XhcCache* cache) {
  const int n = cache->B * cache->T_len, D = d.D(), C = d.C;
  const std::vector<float> wst = StackMapRows(d, P);
#pragma omp parallel
  {
    std::vector<float> dx(static_cast<size_t>(D));
#pragma omp for schedule(dynamic, 16)
    for (int tok = 0; tok < n; ++tok) {
      const size_t off = static_cast<size_t>(tok) * D;
      TokenBackwardInput(d, P, wst.data(), X_in + off, du + static_cast<size_t>(tok) * C, tok,
                         dX + off, cache, dx.data());
    }
  }
  return absl::OkStatus();
}

absl::Status BackwardWeights(const XhcDims& d, const XhcParams& P, const float* X_in,
                             const XhcCache& cache, const XhcGrads& G) {
  const int N = d.N, C = d.C, W = N + 2;
  const int rows = cache.B * cache.T_len * N;  // (token, stream) rows of X_in, each of C
  // A (rows, W): d loss / d dot * rms factor, so tmp (W, C) = A^T X_in is the weight gradient.
  std::vector<float> A(static_cast<size_t>(rows) * W), tmp(static_cast<size_t>(W) * C);
  std::vector<float> bias_pre(N, 0.0f), bias_post(N, 0.0f), bias_res(N * N, 0.0f);
  float alpha_pre = 0, alpha_post = 0, alpha_res = 0;
  for (int row = 0; row < rows; ++row) {  // sequential: a fixed order for the scalar sums
    const int i = row % N;
    const float r = cache.hc_rstd[row];
    for (int col = 0; col < W; ++col) {
      const float dh = cache.hc_dmap[static_cast<size_t>(row) * W + col];
      const float t = std::tanh(cache.hc_dots[static_cast<size_t>(row) * W + col]);
      A[static_cast<size_t>(row) * W + col] = dh * MapAlpha(P, col) * (1.0f - t * t) * r;
      if (col == 0) {
        bias_pre[i] += dh, alpha_pre += dh * t;
      } else if (col == 1) {
        bias_post[i] += dh, alpha_post += dh * t;
      } else {
        bias_res[(col - 2) * N + i] += dh, alpha_res += dh * t;
      }
    }
  }
  cpu::DeterministicSgemm(true, false, W, C, rows, A.data(), W, X_in, C, 0.0f, tmp.data(), C);
  for (int c = 0; c < C; ++c) {
    G.pre_weight[c] += tmp[c];
    G.post_weight[c] += tmp[C + c];
  }
  for (int e = 0; e < N * C; ++e) G.res_weight[e] += tmp[2 * C + e];
  for (int i = 0; i < N; ++i) G.pre_bias[i] += bias_pre[i], G.post_bias[i] += bias_post[i];
  for (int e = 0; e < N * N; ++e) G.res_bias[e] += bias_res[e];
  G.pre_alpha[0] += alpha_pre;
  G.post_alpha[0] += alpha_post;
  G.res_alpha[0] += alpha_res;
  return absl::OkStatus();
}

}  // namespace xhc::kernels::hc
