#ifndef XHC_KERNELS_CPU_NN_ATTENTION_REF_H_
#define XHC_KERNELS_CPU_NN_ATTENTION_REF_H_

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

// Naive reference for causal softmax attention with grouped-query heads (model-spec §3):
// query head h reads kv head h / (H/Hkv); scores scaled by 1/sqrt(dh).

namespace xhc::nn::ref {

// q is (B,T,H,dh), k and v are (B,T,Hkv,dh), out is (B,T,H,dh).
// lse is (B,H,T): log Σ_j exp(s_ij), the softmax statistic saved for backward.
template <typename T>
absl::Status AttentionForward(T* out, T* lse, const T* q, const T* k, const T* v, int B, int T_,
                              int H, int Hkv, int dh) {
  RETURN_IF_ERROR(CheckAttention("AttentionForward", B, T_, H, Hkv, dh));
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(dh));
  std::vector<T> s(T_);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      for (int i = 0; i < T_; ++i) {
        const T* qi = q + ((static_cast<long>(b) * T_ + i) * H + h) * dh;
        T mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const T* kj = k + ((static_cast<long>(b) * T_ + j) * Hkv + g) * dh;
          T acc = 0;
          for (int d = 0; d < dh; ++d) acc += qi[d] * kj[d];
          s[j] = acc * scale;
          if (s[j] > mx) mx = s[j];
        }
        T sum = 0;
        for (int j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
        const T l = mx + std::log(sum);
        lse[(static_cast<long>(b) * H + h) * T_ + i] = l;
        T* oi = out + ((static_cast<long>(b) * T_ + i) * H + h) * dh;
        for (int d = 0; d < dh; ++d) oi[d] = 0;
        for (int j = 0; j <= i; ++j) {
          const T p = std::exp(s[j] - l);
          const T* vj = v + ((static_cast<long>(b) * T_ + j) * Hkv + g) * dh;
          for (int d = 0; d < dh; ++d) oi[d] += p * vj[d];
        }
      }
    }
  }
  return absl::OkStatus();
}

// Gradients dq (B,T,H,dh), dk and dv (B,T,Hkv,dh), all overwritten. With P = softmax(S),
// D_i = Σ_d dout_i·out_i: dS_ij = P_ij (dout_i·v_j − D_i); dq_i = scale Σ_j dS_ij k_j;
// dk_j = scale Σ_{h in group, i} dS_ij q_i; dv_j = Σ_{h in group, i} P_ij dout_i.
template <typename T>
absl::Status AttentionBackward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k,
                               const T* v, const T* out, const T* lse, int B, int T_, int H,
                               int Hkv, int dh) {
  RETURN_IF_ERROR(CheckAttention("AttentionBackward", B, T_, H, Hkv, dh));
  const int group = H / Hkv;
  const T scale = T(1) / std::sqrt(static_cast<T>(dh));
  for (long n = 0; n < static_cast<long>(B) * T_ * H * dh; ++n) dq[n] = 0;
  for (long n = 0; n < static_cast<long>(B) * T_ * Hkv * dh; ++n) dk[n] = dv[n] = 0;
  auto qidx = [&](int b, int t, int h) { return ((static_cast<long>(b) * T_ + t) * H + h) * dh; };
  auto kidx = [&](int b, int t, int g) { return ((static_cast<long>(b) * T_ + t) * Hkv + g) * dh; };
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < H; ++h) {
      const int g = h / group;
      for (int i = 0; i < T_; ++i) {
        const T l = lse[(static_cast<long>(b) * H + h) * T_ + i];
        T D = 0;
        for (int d = 0; d < dh; ++d) D += dout[qidx(b, i, h) + d] * out[qidx(b, i, h) + d];
        for (int j = 0; j <= i; ++j) {
          T sc = 0, dp = 0;
          for (int d = 0; d < dh; ++d) {
            sc += q[qidx(b, i, h) + d] * k[kidx(b, j, g) + d];
            dp += dout[qidx(b, i, h) + d] * v[kidx(b, j, g) + d];
          }
          const T p = std::exp(sc * scale - l);
          const T ds = p * (dp - D);
          for (int d = 0; d < dh; ++d) {
            dq[qidx(b, i, h) + d] += scale * ds * k[kidx(b, j, g) + d];
            dk[kidx(b, j, g) + d] += scale * ds * q[qidx(b, i, h) + d];
            dv[kidx(b, j, g) + d] += p * dout[qidx(b, i, h) + d];
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_ATTENTION_REF_H_
