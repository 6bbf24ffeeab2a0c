#ifndef XHC_RUNTIME_MODEL_BLOCKS_H_
#define XHC_RUNTIME_MODEL_BLOCKS_H_

// The sublayer functions F of model-spec.md section 3 (attention with RoPE and GQA, SwiGLU
// MLP) on one micro-batch, with the backward split into the input gradient (now) and the
// weight gradient (deferred: zero-bubble and DualPipe schedules run it later). Each Acts
// struct holds what forward saved plus what the input-gradient pass stashed for the weight
// pass.

#include <vector>

#include "absl/status/status.h"
#include "runtime/common/config.h"
#include "runtime/model/params.h"

namespace xhc::model {

template <typename T>
struct AttentionWeights {
  ParamT<T>* norm;  // attn_norm.weight
  ParamT<T>* wq;
  ParamT<T>* wk;
  ParamT<T>* wv;
  ParamT<T>* wo;
};

template <typename T>
struct MlpWeights {
  ParamT<T>* norm;  // mlp_norm.weight
  ParamT<T>* w1;
  ParamT<T>* w3;
  ParamT<T>* w2;
};

template <typename T>
struct AttentionActs {
  // Forward (n = B·T tokens).
  std::vector<T> u;     // (n, C) input
  std::vector<T> rstd;  // (n)
  std::vector<T> a;     // (n, C) normalised input
  std::vector<T> qr;    // (n, H·dh) after RoPE
  std::vector<T> kr;    // (n, Hkv·dh) after RoPE
  std::vector<T> v;     // (n, Hkv·dh)
  std::vector<T> att;   // (n, H·dh)
  std::vector<T> lse;   // (B, H, T)
  // Stashed by the input-gradient pass for the weight pass.
  std::vector<T> d_out;  // (n, C)
  std::vector<T> dq;     // (n, H·dh) before RoPE
  std::vector<T> dk;     // (n, Hkv·dh) before RoPE
  std::vector<T> dv;     // (n, Hkv·dh)
  std::vector<T> da;     // (n, C)
};

template <typename T>
struct MlpActs {
  std::vector<T> u, rstd, a;  // (n, C), (n), (n, C)
  std::vector<T> h1, h3;      // (n, d_ff) pre-activations
  std::vector<T> g;           // (n, d_ff) silu(h1) ⊙ h3
  std::vector<T> d_out, dh1, dh3, da;
};

// out (n, C) = Attention(u); u is (B, T, C).
template <typename T>
absl::Status AttentionForward(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                              const T* u, T* out, AttentionActs<T>* acts);
// du (n, C) from d_out (n, C); stashes what AttentionBackwardWeight needs.
template <typename T>
absl::Status AttentionBackwardInput(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                                    const T* d_out, T* du, AttentionActs<T>* acts);
// Accumulates the attention weights' gradients (+=).
template <typename T>
absl::Status AttentionBackwardWeight(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                                     const AttentionActs<T>& acts);

template <typename T>
absl::Status MlpForward(const ModelConfig& cfg, const MlpWeights<T>& w, int B, const T* u, T* out,
                        MlpActs<T>* acts);
template <typename T>
absl::Status MlpBackwardInput(const ModelConfig& cfg, const MlpWeights<T>& w, int B, const T* d_out,
                              T* du, MlpActs<T>* acts);
template <typename T>
absl::Status MlpBackwardWeight(const ModelConfig& cfg, const MlpWeights<T>& w, int B,
                               const MlpActs<T>& acts);

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_BLOCKS_H_
