#include "kernels/cpu/nn/attention.h"

#include <cmath>
#include <vector>

namespace xhc::nn {
namespace {

// Strided view of one head of a (B,T,heads,dh) tensor: row t starts at base + t·stride.
struct HeadView {
  const float* base;
  long stride;
  const float* row(int t) const { return base + t * stride; }
};

// Copies rows 0..T-1 of a head into a (dh, T) matrix so that a query's scores against all
// keys become dh unit-stride axpys over keys, which vectorize without a horizontal sum.
void transpose_head(std::vector<float>& dst, HeadView src, int T, int dh) {
  dst.resize(static_cast<size_t>(dh) * T);
  for (int t = 0; t < T; ++t) {
    const float* r = src.row(t);
    for (int d = 0; d < dh; ++d) dst[static_cast<size_t>(d) * T + t] = r[d];
  }
}

// s[j] = Σ_d a[d]·mt[d][j] for j < n, where mt is a (dh, T) transposed head.
void row_times_transposed(float* s, const float* a, const float* mt, int n, int T, int dh) {
  for (int j = 0; j < n; ++j) s[j] = 0.0f;
  for (int d = 0; d < dh; ++d) {
    const float ad = a[d];
    const float* m = mt + static_cast<size_t>(d) * T;
#pragma omp simd
    for (int j = 0; j < n; ++j) s[j] += ad * m[j];
  }
}

// y[d] += a · x[d] over one head row.
inline void axpy(float* y, float a, const float* x, int dh) {
#pragma omp simd
  for (int d = 0; d < dh; ++d) y[d] += a * x[d];
}

// One (b, h) pair: all query rows against the causal prefix of keys.
void forward_head(float* out, float* lse, HeadView q, HeadView k, HeadView v, long out_stride,
                  int T, int dh, float scale) {
  std::vector<float> kt, s(T), qs(dh), o(dh);
  transpose_head(kt, k, T, dh);
  for (int i = 0; i < T; ++i) {
    const float* qi = q.row(i);
    for (int d = 0; d < dh; ++d) qs[d] = qi[d] * scale;
    const int n = i + 1;
    row_times_transposed(s.data(), qs.data(), kt.data(), n, T, dh);
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < n; ++j) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    lse[i] = mx + std::log(sum);
    for (int d = 0; d < dh; ++d) o[d] = 0.0f;
    for (int j = 0; j < n; ++j) axpy(o.data(), s[j], v.row(j), dh);
    const float inv = 1.0f / sum;
    float* oi = out + i * out_stride;
    for (int d = 0; d < dh; ++d) oi[d] = o[d] * inv;
  }
}

}  // namespace

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       int B, int T, int H, int Hkv, int dh) {
  const int group = H / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const long qs = static_cast<long>(H) * dh, ks = static_cast<long>(Hkv) * dh;
#pragma omp parallel for schedule(dynamic, 1)
  for (int bh = 0; bh < B * H; ++bh) {
    const int b = bh / H, h = bh % H, g = h / group;
    const long qoff = static_cast<long>(b) * T * qs + static_cast<long>(h) * dh;
    const long koff = static_cast<long>(b) * T * ks + static_cast<long>(g) * dh;
    forward_head(out + qoff, lse + static_cast<long>(bh) * T, {q + qoff, qs}, {k + koff, ks},
                 {v + koff, ks}, qs, T, dh, scale);
  }
}

namespace {

// Everything one backward task reads for a single query head.
struct QueryHead {
  HeadView q, dout, out;
  float* dq;  // same layout as q
  const float* lse;
};

// Accumulates one query head's contribution into dk, dv (rows of this task's kv head, with
// the same stride as k) and writes its dq. kt/vt are the transposed k and v of the kv head.
void backward_query_head(const QueryHead& qh, HeadView k, float* dk, float* dv, long kv_stride,
                         const float* kt, const float* vt, int T, int dh, float scale) {
  std::vector<float> p(T), dp(T), qs(dh);
  for (int i = 0; i < T; ++i) {
    const float* qi = qh.q.row(i);
    const float* doi = qh.dout.row(i);
    const float* oi = qh.out.row(i);
    for (int d = 0; d < dh; ++d) qs[d] = qi[d] * scale;
    const int n = i + 1;
    row_times_transposed(p.data(), qs.data(), kt, n, T, dh);
    row_times_transposed(dp.data(), doi, vt, n, T, dh);
    float D = 0.0f;
    for (int d = 0; d < dh; ++d) D += doi[d] * oi[d];
    const float l = qh.lse[i];
    float* dqi = qh.dq + (qi - qh.q.base);
    for (int d = 0; d < dh; ++d) dqi[d] = 0.0f;
    for (int j = 0; j < n; ++j) {
      const float pj = std::exp(p[j] - l);
      const float ds = pj * (dp[j] - D) * scale;
      axpy(dqi, ds, k.row(j), dh);
      axpy(dk + j * kv_stride, ds, qi, dh);
      axpy(dv + j * kv_stride, pj, doi, dh);
    }
  }
}

}  // namespace

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                        const float* k, const float* v, const float* out, const float* lse,
                        int B, int T, int H, int Hkv, int dh) {
  const int group = H / Hkv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  const long qs = static_cast<long>(H) * dh, ks = static_cast<long>(Hkv) * dh;
  // One task per (b, kv head): it owns those dk/dv rows, so the group's query heads add into
  // them in head order and row order with no cross-thread reduction.
#pragma omp parallel for schedule(dynamic, 1)
  for (int bg = 0; bg < B * Hkv; ++bg) {
    const int b = bg / Hkv, g = bg % Hkv;
    const long koff = static_cast<long>(b) * T * ks + static_cast<long>(g) * dh;
    for (int t = 0; t < T; ++t) {
      for (int d = 0; d < dh; ++d) dk[koff + t * ks + d] = dv[koff + t * ks + d] = 0.0f;
    }
    std::vector<float> kt, vt;
    transpose_head(kt, {k + koff, ks}, T, dh);
    transpose_head(vt, {v + koff, ks}, T, dh);
    for (int h = g * group; h < (g + 1) * group; ++h) {
      const long qoff = static_cast<long>(b) * T * qs + static_cast<long>(h) * dh;
      const QueryHead qh{{q + qoff, qs}, {dout + qoff, qs}, {out + qoff, qs}, dq + qoff,
                         lse + (static_cast<long>(b) * H + h) * T};
      backward_query_head(qh, {k + koff, ks}, dk + koff, dv + koff, ks, kt.data(), vt.data(), T,
                          dh, scale);
    }
  }
}

}  // namespace xhc::nn
