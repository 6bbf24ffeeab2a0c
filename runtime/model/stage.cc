#include "runtime/model/stage.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/nn_ops.h"
#include "kernels/cpu/xhc/xhc_ops_by_type.h"
#include "runtime/model/stage_state.h"

namespace xhc::model {

template <typename T>
StageModelT<T>::StageModelT(const ModelConfig& cfg, const StageSpec& spec, ParamSetT<T>* params)
    : cfg_(cfg), spec_(spec), params_(params) {
  if (spec.has_embed) embed_ = params->Find("embed.weight");
  for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) {
    layers_.push_back(ResolveLayer(cfg, l, *params));
  }
  if (spec.has_head) head_ = ResolveHead(cfg, *params);
  weight_groups_ = GroupByWeightPass(spec, *params);
}

template <typename T>
StageModelT<T>::~StageModelT() = default;

template <typename T>
int64_t StageModelT<T>::StateElements(int B) const {
  return static_cast<int64_t>(B) * cfg_.seq_len * cfg_.residual.n_streams * cfg_.d_model;
}

template <typename T>
absl::Status StageModelT<T>::ForwardSublayer(MicrobatchState<T>* st, int sub_idx, T* X) {
  const LayerWeights<T>& lw = layers_[sub_idx / 2];
  const bool is_mlp = sub_idx % 2 == 1;
  SublayerState<T>& s = st->subs[sub_idx];
  const int B = st->B, C = cfg_.d_model, n = B * cfg_.seq_len;
  std::vector<T> u(static_cast<size_t>(n) * C), out(u.size());
  const bool hc = cfg_.residual.type != ResidualType::kVanilla;
  const HcWeights<T>& hw = is_mlp ? lw.mlp_hc : lw.attn_hc;
  if (hc) {
    PhaseScope timed(phases_, PhaseTimes::kResidualFwd);
    // xhc_flash: the later sublayers of a window share the entry's window context.
    const int pos = WindowPos(hw.config);
    if (sub_idx < pos) {
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", lw.layer,
                       ": this stage starts inside an xhc_flash window (the plan must "
                       "keep each window of model.residual.window sublayers in one stage)"));
    }
    if (pos > 0) s.cache.window = st->subs[sub_idx - pos].cache.window;
    RETURN_IF_ERROR(
        kernels::XhcPre(hw.config, hw.params, B, cfg_.seq_len, C, X, u.data(), &s.cache));
  } else {
    std::copy(X, X + u.size(), u.begin());  // N = 1: u is the state
  }
  {
    PhaseScope timed(phases_, PhaseTimes::kSublayerFwd);
    if (is_mlp) {
      RETURN_IF_ERROR(MlpForward(cfg_, lw.mlp, B, u.data(), out.data(), &s.mlp));
    } else {
      RETURN_IF_ERROR(AttentionForward(cfg_, lw.attn, B, u.data(), out.data(), &s.attn));
    }
  }
  PhaseScope timed(phases_, PhaseTimes::kResidualFwd);
  if (hc) {
    RETURN_IF_ERROR(kernels::XhcPost(hw.config, hw.params, out.data(), X, &s.cache));
    if (observer_) observer_(2 * spec_.first_layer + sub_idx, s.cache);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < out.size(); ++i) X[i] += out[i];
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<double> StageModelT<T>::ForwardHead(MicrobatchState<T>* st, const T* X,
                                                   std::vector<T>* logits) {
  PhaseScope timed(phases_, PhaseTimes::kHeadFwd);
  const int C = cfg_.d_model, V = cfg_.vocab_size, N = cfg_.residual.n_streams;
  const int n = st->B * cfg_.seq_len;
  st->y.assign(static_cast<size_t>(n) * C, T(0));
  if (N > 1) {
    RETURN_IF_ERROR(
        kernels::HeadReduceForward(head_.hc, n, N, C, X, st->y.data(), &st->head_cache));
  } else {
    std::copy(X, X + st->y.size(), st->y.begin());
  }
  st->rstd_f.resize(n);
  st->z.resize(st->y.size());
  RETURN_IF_ERROR(nn::RmsnormForward(st->z.data(), st->rstd_f.data(), st->y.data(),
                                     head_.final_norm->value.data(), n, C,
                                     static_cast<T>(cfg_.norm_eps)));
  logits->resize(static_cast<size_t>(n) * V);
  RETURN_IF_ERROR(
      nn::MatmulForward(logits->data(), st->z.data(), head_.lm_head->value.data(), n, C, V));
  if (st->targets.empty()) return 0.0;
  st->lse.resize(n);
  T loss = 0;
  RETURN_IF_ERROR(
      nn::CrossEntropyForward(&loss, st->lse.data(), logits->data(), st->targets.data(), n, V));
  return static_cast<double>(loss);
}

template <typename T>
absl::StatusOr<double> StageModelT<T>::RunForward(MicrobatchState<T>* st, int B,
                                                  const int32_t* tokens, const int32_t* targets,
                                                  const T* x_in, T* x_out, std::vector<T>* logits) {
  const int Tl = cfg_.seq_len, C = cfg_.d_model, N = cfg_.residual.n_streams, n = B * Tl;
  st->B = B;
  st->subs.resize(2 * layers_.size());
  const size_t state_size = static_cast<size_t>(StateElements(B));
  // The state X lives in x_out on a middle stage (the caller may pass x_in's buffer as x_out:
  // then nothing is copied in), else in `own`.
  const bool in_x_out = !spec_.has_embed && !spec_.has_head;
  std::vector<T> own;
  // A recycled state's buffer (Recycle hands the last X_out back in X_out), not a fresh one
  // zero-filled for every micro-batch (32 MiB for xhc at 1024 tokens;
  // docs/design/state-buffers-and-memory.md).
  if (!in_x_out) own.swap(st->X_out);
  T* X = x_out;
  if (spec_.has_embed) {
    own.resize(state_size);  // ExpandForward below writes every element
    X = own.data();
    PhaseScope timed(phases_, PhaseTimes::kEmbed);
    st->tokens.assign(tokens, tokens + n);
    std::vector<T> e(static_cast<size_t>(n) * C);
    for (int i = 0; i < n; ++i) {
      const int tok = tokens[i];
      if (tok < 0 || tok >= cfg_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("token id ", tok, " outside vocabulary"));
      }
      std::memcpy(&e[static_cast<size_t>(i) * C], &embed_->value[static_cast<size_t>(tok) * C],
                  sizeof(T) * C);
    }
    kernels::ExpandForward(n, N, C, e.data(), X);
  } else if (in_x_out) {
    if (x_out != x_in) std::copy(x_in, x_in + state_size, x_out);
  } else {
    own.assign(x_in, x_in + state_size);  // not sized first: that would zero-fill it too
    X = own.data();
  }
  for (int s = 0; s < static_cast<int>(st->subs.size()); ++s) {
    RETURN_IF_ERROR(ForwardSublayer(st, s, X));
  }
  // The one saved copy of the state (stage_state.h), for a forward that a backward follows:
  // `own` itself where X lived there, once its last reader here is done.
  const bool keep = st->for_backward && cfg_.residual.type != ResidualType::kVanilla;
  if (!spec_.has_head) {
    if (in_x_out) {
      if (keep) st->X_out.assign(X, X + state_size);
    } else {
      std::copy(X, X + state_size, x_out);
      if (keep) st->X_out = std::move(own);
    }
    return 0.0;
  }
  if (targets != nullptr) st->targets.assign(targets, targets + n);
  ASSIGN_OR_RETURN(const double loss, ForwardHead(st, X, logits));
  if (keep) st->X_out = std::move(own);
  return loss;
}

template <typename T>
absl::StatusOr<double> StageModelT<T>::Forward(int mb, int B, const int32_t* tokens,
                                               const int32_t* targets, const T* x_in, T* x_out) {
  if (inflight_.count(mb)) {
    return absl::FailedPreconditionError(absl::StrCat("micro-batch ", mb, " already in flight"));
  }
  std::unique_ptr<MicrobatchState<T>> st = TakeState();
  st->for_backward = true;
  ASSIGN_OR_RETURN(double loss, RunForward(st.get(), B, tokens, targets, x_in, x_out, &st->logits));
  inflight_[mb] = std::move(st);
  max_in_flight_ = std::max(max_in_flight_, inflight_.size());
  return loss;
}

template <typename T>
absl::StatusOr<double> StageModelT<T>::ForwardOnly(int B, const int32_t* tokens,
                                                   const int32_t* targets, const T* x_in, T* x_out,
                                                   std::vector<T>* logits) {
  MicrobatchState<T> st;
  std::vector<T> local;
  return RunForward(&st, B, tokens, targets, x_in, x_out, logits ? logits : &local);
}

template <typename T>
std::unique_ptr<MicrobatchState<T>> StageModelT<T>::TakeState() {
  if (spare_.empty()) return std::make_unique<MicrobatchState<T>>();
  std::unique_ptr<MicrobatchState<T>> st = std::move(spare_.back());
  spare_.pop_back();
  return st;
}

template <typename T>
void StageModelT<T>::Recycle(std::unique_ptr<MicrobatchState<T>> st) {
  // Buffers keep their contents (overwritten by the next use); the rest starts afresh.
  st->B = 0;
  st->tokens.clear();
  st->targets.clear();
  st->X_w_ready = false;
  // The weight pass took X_out over as X_w: its buffer is the next forward's state buffer.
  if (st->X_out.empty()) st->X_out.swap(st->X_w);
  st->for_backward = false;
  st->pending_w.clear();
  st->backward_done = false;
  if (inflight_.size() + spare_.size() < max_in_flight_) spare_.push_back(std::move(st));
}

template class StageModelT<float>;
template class StageModelT<double>;

}  // namespace xhc::model
