#include "runtime/model/blocks.h"

#include <algorithm>

#include "runtime/model/backend.h"

namespace xhc::model {
namespace {

template <typename T>
void Resize(std::vector<T>* v, size_t n) {
  v->resize(n);
}

}  // namespace

template <typename T>
void AttentionForward(const ModelConfig& cfg, const AttentionWeights<T>& w, int B, const T* u,
                      T* out, AttentionActs<T>* acts) {
  using K = Backend<T>;
  const int Tl = cfg.seq_len, C = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const int dh = cfg.head_dim(), n = B * Tl;
  acts->u.assign(u, u + static_cast<size_t>(n) * C);
  Resize(&acts->rstd, n);
  Resize(&acts->a, static_cast<size_t>(n) * C);
  K::RmsnormForward(acts->a.data(), acts->rstd.data(), u, w.norm->value.data(), n, C, cfg.norm_eps);
  std::vector<T> q(static_cast<size_t>(n) * H * dh), k(static_cast<size_t>(n) * Hkv * dh);
  Resize(&acts->v, k.size());
  K::MatmulForward(q.data(), acts->a.data(), w.wq->value.data(), n, C, H * dh);
  K::MatmulForward(k.data(), acts->a.data(), w.wk->value.data(), n, C, Hkv * dh);
  K::MatmulForward(acts->v.data(), acts->a.data(), w.wv->value.data(), n, C, Hkv * dh);
  Resize(&acts->qr, q.size());
  Resize(&acts->kr, k.size());
  K::RopeForward(acts->qr.data(), q.data(), B, Tl, H, dh, cfg.rope_theta);
  K::RopeForward(acts->kr.data(), k.data(), B, Tl, Hkv, dh, cfg.rope_theta);
  Resize(&acts->att, q.size());
  Resize(&acts->lse, static_cast<size_t>(B) * H * Tl);
  K::AttentionForward(acts->att.data(), acts->lse.data(), acts->qr.data(), acts->kr.data(),
                      acts->v.data(), B, Tl, H, Hkv, dh);
  K::MatmulForward(out, acts->att.data(), w.wo->value.data(), n, H * dh, C);
}

template <typename T>
void AttentionBackwardInput(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                            const T* d_out, T* du, AttentionActs<T>* acts) {
  using K = Backend<T>;
  const int Tl = cfg.seq_len, C = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const int dh = cfg.head_dim(), n = B * Tl;
  acts->d_out.assign(d_out, d_out + static_cast<size_t>(n) * C);
  std::vector<T> d_att(acts->att.size());
  K::MatmulBackwardInput(d_att.data(), d_out, w.wo->value.data(), n, H * dh, C, false);
  Resize(&acts->dq, acts->qr.size());
  Resize(&acts->dk, acts->kr.size());
  Resize(&acts->dv, acts->v.size());
  K::AttentionBackward(acts->dq.data(), acts->dk.data(), acts->dv.data(), d_att.data(),
                       acts->qr.data(), acts->kr.data(), acts->v.data(), acts->att.data(),
                       acts->lse.data(), B, Tl, H, Hkv, dh);
  K::RopeBackward(acts->dq.data(), acts->dq.data(), B, Tl, H, dh, cfg.rope_theta);
  K::RopeBackward(acts->dk.data(), acts->dk.data(), B, Tl, Hkv, dh, cfg.rope_theta);
  Resize(&acts->da, static_cast<size_t>(n) * C);
  K::MatmulBackwardInput(acts->da.data(), acts->dq.data(), w.wq->value.data(), n, C, H * dh, false);
  K::MatmulBackwardInput(acts->da.data(), acts->dk.data(), w.wk->value.data(), n, C, Hkv * dh,
                         true);
  K::MatmulBackwardInput(acts->da.data(), acts->dv.data(), w.wv->value.data(), n, C, Hkv * dh,
                         true);
  K::RmsnormBackwardInput(du, acts->da.data(), acts->u.data(), w.norm->value.data(),
                          acts->rstd.data(), n, C);
  // Forward activations only the weight pass still needs are kept; the rest can go.
  std::vector<T>().swap(acts->qr);
  std::vector<T>().swap(acts->kr);
  std::vector<T>().swap(acts->v);
  std::vector<T>().swap(acts->lse);
}

template <typename T>
void AttentionBackwardWeight(const ModelConfig& cfg, const AttentionWeights<T>& w, int B,
                             const AttentionActs<T>& acts) {
  using K = Backend<T>;
  const int Tl = cfg.seq_len, C = cfg.d_model, H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const int dh = cfg.head_dim(), n = B * Tl;
  K::MatmulBackwardWeight(w.wo->grad.data(), acts.d_out.data(), acts.att.data(), n, H * dh, C);
  K::MatmulBackwardWeight(w.wq->grad.data(), acts.dq.data(), acts.a.data(), n, C, H * dh);
  K::MatmulBackwardWeight(w.wk->grad.data(), acts.dk.data(), acts.a.data(), n, C, Hkv * dh);
  K::MatmulBackwardWeight(w.wv->grad.data(), acts.dv.data(), acts.a.data(), n, C, Hkv * dh);
  K::RmsnormBackwardWeight(w.norm->grad.data(), acts.da.data(), acts.u.data(), acts.rstd.data(), n,
                           C);
}

template <typename T>
void MlpForward(const ModelConfig& cfg, const MlpWeights<T>& w, int B, const T* u, T* out,
                MlpActs<T>* acts) {
  using K = Backend<T>;
  const int C = cfg.d_model, F = cfg.d_ff, n = B * cfg.seq_len;
  acts->u.assign(u, u + static_cast<size_t>(n) * C);
  Resize(&acts->rstd, n);
  Resize(&acts->a, static_cast<size_t>(n) * C);
  K::RmsnormForward(acts->a.data(), acts->rstd.data(), u, w.norm->value.data(), n, C, cfg.norm_eps);
  Resize(&acts->h1, static_cast<size_t>(n) * F);
  Resize(&acts->h3, static_cast<size_t>(n) * F);
  Resize(&acts->g, static_cast<size_t>(n) * F);
  K::MatmulForward(acts->h1.data(), acts->a.data(), w.w1->value.data(), n, C, F);
  K::MatmulForward(acts->h3.data(), acts->a.data(), w.w3->value.data(), n, C, F);
  K::SwigluForward(acts->g.data(), acts->h1.data(), acts->h3.data(), static_cast<long>(n) * F);
  K::MatmulForward(out, acts->g.data(), w.w2->value.data(), n, F, C);
}

template <typename T>
void MlpBackwardInput(const ModelConfig& cfg, const MlpWeights<T>& w, int B, const T* d_out, T* du,
                      MlpActs<T>* acts) {
  using K = Backend<T>;
  const int C = cfg.d_model, F = cfg.d_ff, n = B * cfg.seq_len;
  acts->d_out.assign(d_out, d_out + static_cast<size_t>(n) * C);
  std::vector<T> dg(acts->g.size());
  K::MatmulBackwardInput(dg.data(), d_out, w.w2->value.data(), n, F, C, false);
  Resize(&acts->dh1, dg.size());
  Resize(&acts->dh3, dg.size());
  K::SwigluBackward(acts->dh1.data(), acts->dh3.data(), dg.data(), acts->h1.data(), acts->h3.data(),
                    static_cast<long>(n) * F);
  Resize(&acts->da, static_cast<size_t>(n) * C);
  K::MatmulBackwardInput(acts->da.data(), acts->dh1.data(), w.w1->value.data(), n, C, F, false);
  K::MatmulBackwardInput(acts->da.data(), acts->dh3.data(), w.w3->value.data(), n, C, F, true);
  K::RmsnormBackwardInput(du, acts->da.data(), acts->u.data(), w.norm->value.data(),
                          acts->rstd.data(), n, C);
  std::vector<T>().swap(acts->h1);
  std::vector<T>().swap(acts->h3);
}

template <typename T>
void MlpBackwardWeight(const ModelConfig& cfg, const MlpWeights<T>& w, int B,
                       const MlpActs<T>& acts) {
  using K = Backend<T>;
  const int C = cfg.d_model, F = cfg.d_ff, n = B * cfg.seq_len;
  K::MatmulBackwardWeight(w.w2->grad.data(), acts.d_out.data(), acts.g.data(), n, F, C);
  K::MatmulBackwardWeight(w.w1->grad.data(), acts.dh1.data(), acts.a.data(), n, C, F);
  K::MatmulBackwardWeight(w.w3->grad.data(), acts.dh3.data(), acts.a.data(), n, C, F);
  K::RmsnormBackwardWeight(w.norm->grad.data(), acts.da.data(), acts.u.data(), acts.rstd.data(), n,
                           C);
}

#define XHC_INSTANTIATE_BLOCKS(T)                                                                  \
  template void AttentionForward<T>(const ModelConfig&, const AttentionWeights<T>&, int, const T*, \
                                    T*, AttentionActs<T>*);                                        \
  template void AttentionBackwardInput<T>(const ModelConfig&, const AttentionWeights<T>&, int,     \
                                          const T*, T*, AttentionActs<T>*);                        \
  template void AttentionBackwardWeight<T>(const ModelConfig&, const AttentionWeights<T>&, int,    \
                                           const AttentionActs<T>&);                               \
  template void MlpForward<T>(const ModelConfig&, const MlpWeights<T>&, int, const T*, T*,         \
                              MlpActs<T>*);                                                        \
  template void MlpBackwardInput<T>(const ModelConfig&, const MlpWeights<T>&, int, const T*, T*,   \
                                    MlpActs<T>*);                                                  \
  template void MlpBackwardWeight<T>(const ModelConfig&, const MlpWeights<T>&, int,                \
                                     const MlpActs<T>&);

XHC_INSTANTIATE_BLOCKS(float)
XHC_INSTANTIATE_BLOCKS(double)

}  // namespace xhc::model
