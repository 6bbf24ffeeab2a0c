#include "runtime/model/blocks.h"

#include <algorithm>

#include "base/status_macros.h"
#include "kernels/cpu/nn/nn_ops.h"
#include "kernels/cpu/xhc/xhc_ops_by_type.h"

namespace xhc::model {
namespace {

template <typename T>
void Resize(std::vector<T>* v, size_t n) {
  v->resize(n);
}

}  // namespace

template <typename T>
absl::Status AttentionForward(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                              const T* u, T* out, AttentionActs<T>* acts) {
  const int Tl = cfg.seq_len, C = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const int dh = cfg.head_dim(), n = B * Tl;
  acts->u.assign(u, u + static_cast<size_t>(n) * C);
  Resize(&acts->rstd, n);
  Resize(&acts->a, static_cast<size_t>(n) * C);
  RETURN_IF_ERROR(nn::RmsnormForward(acts->a.data(), acts->rstd.data(), u, w.norm->value.data(), n,
                                     C, static_cast<T>(cfg.norm_eps)));
  std::vector<T> q(static_cast<size_t>(n) * H * dh), k(static_cast<size_t>(n) * Hkv * dh);
  Resize(&acts->v, k.size());
  RETURN_IF_ERROR(nn::MatmulForward(q.data(), acts->a.data(), w.wq->value.data(), n, C, H * dh));
  RETURN_IF_ERROR(nn::MatmulForward(k.data(), acts->a.data(), w.wk->value.data(), n, C, Hkv * dh));
  RETURN_IF_ERROR(
      nn::MatmulForward(acts->v.data(), acts->a.data(), w.wv->value.data(), n, C, Hkv * dh));
  Resize(&acts->qr, q.size());
  Resize(&acts->kr, k.size());
  RETURN_IF_ERROR(
      nn::RopeForward(acts->qr.data(), q.data(), B, Tl, H, dh, static_cast<T>(cfg.rope_theta)));
  RETURN_IF_ERROR(
      nn::RopeForward(acts->kr.data(), k.data(), B, Tl, Hkv, dh, static_cast<T>(cfg.rope_theta)));
  Resize(&acts->att, q.size());
  Resize(&acts->lse, static_cast<size_t>(B) * H * Tl);
  RETURN_IF_ERROR(nn::AttentionForward(acts->att.data(), acts->lse.data(), acts->qr.data(),
                                       acts->kr.data(), acts->v.data(), B, Tl, H, Hkv, dh));
  RETURN_IF_ERROR(nn::MatmulForward(out, acts->att.data(), w.wo->value.data(), n, H * dh, C));
  return absl::OkStatus();
}

template <typename T>
absl::Status AttentionBackwardInput(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                                    const T* d_out, T* du, AttentionActs<T>* acts) {
  const int Tl = cfg.seq_len, C = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const int dh = cfg.head_dim(), n = B * Tl;
  acts->d_out.assign(d_out, d_out + static_cast<size_t>(n) * C);
  std::vector<T> d_att(acts->att.size());
  RETURN_IF_ERROR(
      nn::MatmulBackwardInput(d_att.data(), d_out, w.wo->value.data(), n, H * dh, C, false));
  Resize(&acts->dq, acts->qr.size());
  Resize(&acts->dk, acts->kr.size());
  Resize(&acts->dv, acts->v.size());
  RETURN_IF_ERROR(nn::AttentionBackward(
      acts->dq.data(), acts->dk.data(), acts->dv.data(), d_att.data(), acts->qr.data(),
      acts->kr.data(), acts->v.data(), acts->att.data(), acts->lse.data(), B, Tl, H, Hkv, dh));
  RETURN_IF_ERROR(nn::RopeBackward(acts->dq.data(), acts->dq.data(), B, Tl, H, dh,
                                   static_cast<T>(cfg.rope_theta)));
  RETURN_IF_ERROR(nn::RopeBackward(acts->dk.data(), acts->dk.data(), B, Tl, Hkv, dh,
                                   static_cast<T>(cfg.rope_theta)));
  Resize(&acts->da, static_cast<size_t>(n) * C);
  RETURN_IF_ERROR(nn::MatmulBackwardInput(acts->da.data(), acts->dq.data(), w.wq->value.data(), n,
                                          C, H * dh, false));
  RETURN_IF_ERROR(nn::MatmulBackwardInput(acts->da.data(), acts->dk.data(), w.wk->value.data(), n,
                                          C, Hkv * dh, true));
  RETURN_IF_ERROR(nn::MatmulBackwardInput(acts->da.data(), acts->dv.data(), w.wv->value.data(), n,
                                          C, Hkv * dh, true));
  RETURN_IF_ERROR(nn::RmsnormBackwardInput(du, acts->da.data(), acts->u.data(),
                                           w.norm->value.data(), acts->rstd.data(), n, C));
  // Forward activations only the weight pass still needs are kept; the rest can go.
  std::vector<T>().swap(acts->qr);
  std::vector<T>().swap(acts->kr);
  std::vector<T>().swap(acts->v);
  std::vector<T>().swap(acts->lse);
  return absl::OkStatus();
}

template <typename T>
absl::Status AttentionBackwardWeight(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                                     const AttentionActs<T>& acts) {
  const int Tl = cfg.seq_len, C = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const int dh = cfg.head_dim(), n = B * Tl;
  RETURN_IF_ERROR(nn::MatmulBackwardWeight(w.wo->grad.data(), acts.d_out.data(), acts.att.data(), n,
                                           H * dh, C));
  RETURN_IF_ERROR(
      nn::MatmulBackwardWeight(w.wq->grad.data(), acts.dq.data(), acts.a.data(), n, C, H * dh));
  RETURN_IF_ERROR(
      nn::MatmulBackwardWeight(w.wk->grad.data(), acts.dk.data(), acts.a.data(), n, C, Hkv * dh));
  RETURN_IF_ERROR(
      nn::MatmulBackwardWeight(w.wv->grad.data(), acts.dv.data(), acts.a.data(), n, C, Hkv * dh));
  RETURN_IF_ERROR(nn::RmsnormBackwardWeight(w.norm->grad.data(), acts.da.data(), acts.u.data(),
                                            acts.rstd.data(), n, C));
  return absl::OkStatus();
}

template <typename T>
absl::Status MlpForward(const ModelConfig& cfg, const MlpWeights<T>& w, int B, const T* u, T* out,
                        MlpActs<T>* acts) {
  const int C = cfg.d_model, F = cfg.d_ff, n = B * cfg.seq_len;
  acts->u.assign(u, u + static_cast<size_t>(n) * C);
  Resize(&acts->rstd, n);
  Resize(&acts->a, static_cast<size_t>(n) * C);
  RETURN_IF_ERROR(nn::RmsnormForward(acts->a.data(), acts->rstd.data(), u, w.norm->value.data(), n,
                                     C, static_cast<T>(cfg.norm_eps)));
  Resize(&acts->h1, static_cast<size_t>(n) * F);
  Resize(&acts->h3, static_cast<size_t>(n) * F);
  Resize(&acts->g, static_cast<size_t>(n) * F);
  RETURN_IF_ERROR(nn::MatmulForward(acts->h1.data(), acts->a.data(), w.w1->value.data(), n, C, F));
  RETURN_IF_ERROR(nn::MatmulForward(acts->h3.data(), acts->a.data(), w.w3->value.data(), n, C, F));
  RETURN_IF_ERROR(nn::SwigluForward(acts->g.data(), acts->h1.data(), acts->h3.data(),
                                    static_cast<long>(n) * F));
  RETURN_IF_ERROR(nn::MatmulForward(out, acts->g.data(), w.w2->value.data(), n, F, C));
  return absl::OkStatus();
}

template <typename T>
absl::Status MlpBackwardInput(const ModelConfig& cfg, const MlpWeights<T>& w, int B, const T* d_out,
                              T* du, MlpActs<T>* acts) {
  const int C = cfg.d_model, F = cfg.d_ff, n = B * cfg.seq_len;
  acts->d_out.assign(d_out, d_out + static_cast<size_t>(n) * C);
  std::vector<T> dg(acts->g.size());
  RETURN_IF_ERROR(nn::MatmulBackwardInput(dg.data(), d_out, w.w2->value.data(), n, F, C, false));
  Resize(&acts->dh1, dg.size());
  Resize(&acts->dh3, dg.size());
  RETURN_IF_ERROR(nn::SwigluBackward(acts->dh1.data(), acts->dh3.data(), dg.data(), acts->h1.data(),
                                     acts->h3.data(), static_cast<long>(n) * F));
  Resize(&acts->da, static_cast<size_t>(n) * C);
  RETURN_IF_ERROR(nn::MatmulBackwardInput(acts->da.data(), acts->dh1.data(), w.w1->value.data(), n,
                                          C, F, false));
  RETURN_IF_ERROR(nn::MatmulBackwardInput(acts->da.data(), acts->dh3.data(), w.w3->value.data(), n,
                                          C, F, true));
  RETURN_IF_ERROR(nn::RmsnormBackwardInput(du, acts->da.data(), acts->u.data(),
                                           w.norm->value.data(), acts->rstd.data(), n, C));
  std::vector<T>().swap(acts->h1);
  std::vector<T>().swap(acts->h3);
  return absl::OkStatus();
}

template <typename T>
absl::Status MlpBackwardWeight(const ModelConfig& cfg, const MlpWeights<T>& w, int B,
                               const MlpActs<T>& acts) {
  const int C = cfg.d_model, F = cfg.d_ff, n = B * cfg.seq_len;
  RETURN_IF_ERROR(
      nn::MatmulBackwardWeight(w.w2->grad.data(), acts.d_out.data(), acts.g.data(), n, F, C));
  RETURN_IF_ERROR(
      nn::MatmulBackwardWeight(w.w1->grad.data(), acts.dh1.data(), acts.a.data(), n, C, F));
  RETURN_IF_ERROR(
      nn::MatmulBackwardWeight(w.w3->grad.data(), acts.dh3.data(), acts.a.data(), n, C, F));
  RETURN_IF_ERROR(nn::RmsnormBackwardWeight(w.norm->grad.data(), acts.da.data(), acts.u.data(),
                                            acts.rstd.data(), n, C));
  return absl::OkStatus();
}

#define XHC_INSTANTIATE_BLOCKS(T)                                                                  \
  template absl::Status AttentionForward<T>(const ModelConfig&, const AttentionWeights<T>&, int,   \
                                            const T*, T*, AttentionActs<T>*);                      \
  template absl::Status AttentionBackwardInput<T>(const ModelConfig&, const AttentionWeights<T>&,  \
                                                  int, const T*, T*, AttentionActs<T>*);           \
  template absl::Status AttentionBackwardWeight<T>(const ModelConfig&, const AttentionWeights<T>&, \
                                                   int, const AttentionActs<T>&);                  \
  template absl::Status MlpForward<T>(const ModelConfig&, const MlpWeights<T>&, int, const T*, T*, \
                                      MlpActs<T>*);                                                \
  template absl::Status MlpBackwardInput<T>(const ModelConfig&, const MlpWeights<T>&, int,         \
                                            const T*, T*, MlpActs<T>*);                            \
  template absl::Status MlpBackwardWeight<T>(const ModelConfig&, const MlpWeights<T>&, int,        \
                                             const MlpActs<T>&);

XHC_INSTANTIATE_BLOCKS(float)
XHC_INSTANTIATE_BLOCKS(double)

}  // namespace xhc::model
