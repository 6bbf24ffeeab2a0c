#include "kernels/cpu/nn/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"
#include "third_party/openblas_cblas.h"

namespace xhc::nn {
namespace {

// Query rows per block. Each block multiplies against only the causal prefix of keys
// [0, i0 + rows), so about half of the full T×T work is skipped, and every product is a
// single-threaded sgemm of a shape fixed by (T, dh) alone: same calls, same bits, for any
// number of OpenMP threads (OpenBLAS itself is pinned to one thread, see matmul.cc).
constexpr int kQueryBlock = 64;

void pin_openblas_to_one_thread() {
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

// One head of a (B,T,heads,dh) tensor: row t at base + t·ld.
struct Head {
  const float* base;
  int ld;
  const float* row(int t) const { return base + static_cast<long>(t) * ld; }
};

// c (m,n; ldc) = alpha · a (m,k; lda) · bᵀ (b is (n,k; ldb)) + beta · c.
void gemm_nt(int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
             float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

// c (m,n) = alpha · a (m,k) · b (k,n) + beta · c.
void gemm_nn(int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
             float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

// c (m,n) = alpha · aᵀ (a is (k,m)) · b (k,n) + beta · c.
void gemm_tn(int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
             float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}

// In place over one score row s[0..n): softmax over the causal part j ≤ i, zero beyond.
// Returns the log-sum-exp of the causal part.
float causal_softmax_row(float* s, int i, int n) {
  float mx = -INFINITY;
  for (int j = 0; j <= i; ++j) mx = std::max(mx, s[j]);
  float sum = 0.0f;
  for (int j = 0; j <= i; ++j) {
    s[j] = std::exp(s[j] - mx);
    sum += s[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j <= i; ++j) s[j] *= inv;
  for (int j = i + 1; j < n; ++j) s[j] = 0.0f;
  return mx + std::log(sum);
}

// One (b, h) pair. lse points at this head's T entries.
void forward_head(float* out, float* lse, Head q, Head k, Head v, int T, int dh, float scale) {
  std::vector<float> p(static_cast<size_t>(kQueryBlock) * T);
  for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
    const int rows = std::min(kQueryBlock, T - i0), n = i0 + rows;
    // p (rows, n) = scale · q[i0:] · k[0:n]ᵀ
    gemm_nt(rows, n, dh, scale, q.row(i0), q.ld, k.base, k.ld, 0.0f, p.data(), T);
    for (int r = 0; r < rows; ++r) {
      lse[i0 + r] = causal_softmax_row(p.data() + static_cast<size_t>(r) * T, i0 + r, n);
    }
    // out[i0:] (rows, dh) = p · v[0:n]
    gemm_nn(rows, dh, n, 1.0f, p.data(), T, v.base, v.ld, 0.0f, out + static_cast<long>(i0) * q.ld,
            q.ld);
  }
}

}  // namespace

absl::Status AttentionForward(float* out, float* lse, const float* q, const float* k,
                              const float* v, int B, int T, int H, int Hkv, int dh) {
  RETURN_IF_ERROR(CheckAttention("AttentionForward", B, T, H, Hkv, dh));
  pin_openblas_to_one_thread();
  const int group = H / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const int qs = H * dh, ks = Hkv * dh;
#pragma omp parallel for schedule(dynamic, 1)
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H, g = h / group;
    const long qoff = static_cast<long>(b) * T * qs + static_cast<long>(h) * dh;
    const long koff = static_cast<long>(b) * T * ks + static_cast<long>(g) * dh;
    forward_head(out + qoff, lse + static_cast<long>(bh) * T, {q + qoff, qs}, {k + koff, ks},
                 {v + koff, ks}, T, dh, scale);
  }
  return absl::OkStatus();
}

namespace {

// What backward reads and writes for one query head (same layout as q).
struct QueryHead {
  Head q, dout, out;
  float* dq;
  const float* lse;
};

// Per-task scratch: probabilities and their gradients for one query block.
struct Scratch {
  std::vector<float> p, dp;
  explicit Scratch(int T)
      : p(static_cast<size_t>(kQueryBlock) * T), dp(static_cast<size_t>(kQueryBlock) * T) {}
};

// dp ← P ⊙ (dP − D_i) · scale, row by row; D_i = dout_i · out_i. Masked entries stay 0
// because P is 0 there.
void softmax_backward_rows(Scratch& s, const QueryHead& qh, int i0, int rows, int n, int T, int dh,
                           float scale) {
  for (int r = 0; r < rows; ++r) {
    const float* doi = qh.dout.row(i0 + r);
    const float* oi = qh.out.row(i0 + r);
    float D = 0.0f;
    for (int d = 0; d < dh; ++d) D += doi[d] * oi[d];
    float* pr = s.p.data() + static_cast<size_t>(r) * T;
    float* dpr = s.dp.data() + static_cast<size_t>(r) * T;
#pragma omp simd
    for (int j = 0; j < n; ++j) dpr[j] = pr[j] * (dpr[j] - D) * scale;
  }
}

// One query head's contribution: writes its dq, adds into the kv head's dk, dv.
void backward_query_head(const QueryHead& qh, Head k, Head v, float* dk, float* dv, Scratch& s,
                         int T, int dh, float scale) {
  for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
    const int rows = std::min(kQueryBlock, T - i0), n = i0 + rows;
    // Recompute P from the saved log-sum-exp.
    gemm_nt(rows, n, dh, scale, qh.q.row(i0), qh.q.ld, k.base, k.ld, 0.0f, s.p.data(), T);
    for (int r = 0; r < rows; ++r) {
      float* pr = s.p.data() + static_cast<size_t>(r) * T;
      const float l = qh.lse[i0 + r];
      const int i = i0 + r;
      for (int j = 0; j <= i; ++j) pr[j] = std::exp(pr[j] - l);
      for (int j = i + 1; j < n; ++j) pr[j] = 0.0f;
    }
    // dP (rows, n) = dout[i0:] · v[0:n]ᵀ
    gemm_nt(rows, n, dh, 1.0f, qh.dout.row(i0), qh.dout.ld, v.base, v.ld, 0.0f, s.dp.data(), T);
    softmax_backward_rows(s, qh, i0, rows, n, T, dh, scale);
    const long qrow = static_cast<long>(i0) * qh.q.ld;
    // dq[i0:] = dS · k[0:n];  dk[0:n] += dSᵀ · q[i0:];  dv[0:n] += Pᵀ · dout[i0:]
    gemm_nn(rows, dh, n, 1.0f, s.dp.data(), T, k.base, k.ld, 0.0f, qh.dq + qrow, qh.q.ld);
    gemm_tn(n, dh, rows, 1.0f, s.dp.data(), T, qh.q.row(i0), qh.q.ld, 1.0f, dk, k.ld);
    gemm_tn(n, dh, rows, 1.0f, s.p.data(), T, qh.dout.row(i0), qh.dout.ld, 1.0f, dv, k.ld);
  }
}

}  // namespace

absl::Status AttentionBackward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                               const float* k, const float* v, const float* out, const float* lse,
                               int B, int T, int H, int Hkv, int dh) {
  RETURN_IF_ERROR(CheckAttention("AttentionBackward", B, T, H, Hkv, dh));
  pin_openblas_to_one_thread();
  const int group = H / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const int qs = H * dh, ks = Hkv * dh;
  // One task per (b, kv head): it owns those dk/dv rows, so the group's query heads add into
  // them in head order and block order with no cross-thread reduction.
#pragma omp parallel for schedule(dynamic, 1)
  for (int bg = 0; bg < B * Hkv; ++bg) {
    const int b = bg / Hkv, g = bg % Hkv;
    const long koff = static_cast<long>(b) * T * ks + static_cast<long>(g) * dh;
    for (int t = 0; t < T; ++t) {
      std::fill_n(dk + koff + static_cast<long>(t) * ks, dh, 0.0f);
      std::fill_n(dv + koff + static_cast<long>(t) * ks, dh, 0.0f);
    }
    Scratch scratch(T);
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const long qoff = static_cast<long>(b) * T * qs + static_cast<long>(h) * dh;
      const QueryHead qh{{q + qoff, qs},
                         {dout + qoff, qs},
                         {out + qoff, qs},
                         dq + qoff,
                         lse + (static_cast<long>(b) * H + h) * T};
      backward_query_head(qh, {k + koff, ks}, {v + koff, ks}, dk + koff, dv + koff, scratch, T, dh,
                          scale);
    }
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn
