// The backward half of StageModelT: input gradients now, weight gradients queued per
// micro-batch (FIFO) and run by BackwardWeight.
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/nn_ops.h"
#include "kernels/cpu/xhc/state_restore.h"
#include "kernels/cpu/xhc/xhc_ops_by_type.h"
#include "runtime/model/stage.h"
#include "runtime/model/stage_state.h"

namespace xhc::model {

// X: in, the state after sublayer `sub_idx`; out, the input its residual kernels take: the
// sublayer's own input, or under xhc_flash the window's entry state (rebuilt at the window's
// last sublayer, which backward reaches first, and kept for the rest of the window).
template <typename T>
void RestoreSublayerInput(const MicrobatchState<T>& st, int sub_idx, std::vector<T>* X) {
  const kernels::XhcCacheT<T>& cache = st.subs[sub_idx].cache;
  const int pos = cache.dims.flash ? cache.dims.pos : 0;
  if (cache.dims.flash && pos != cache.dims.window - 1) return;
  kernels::RestoreInput(st.subs[sub_idx - pos].cache, X->data());
}

template <typename T>
absl::Status StageModelT<T>::BackwardSublayer(MicrobatchState<T>* st, int sub_idx, T* dX,
                                              std::vector<T>* X, bool weights_now) {
  const LayerWeights<T>& lw = layers_[sub_idx / 2];
  const bool is_mlp = sub_idx % 2 == 1;
  SublayerState<T>& s = st->subs[sub_idx];
  const int B = st->B, C = cfg_.d_model, n = B * cfg_.seq_len;
  const bool hc = cfg_.residual.type != ResidualType::kVanilla;
  const HcWeights<T>& hw = is_mlp ? lw.mlp_hc : lw.attn_hc;
  std::vector<T> d_out(static_cast<size_t>(n) * C), du(d_out.size());
  if (hc) {
    PhaseScope timed(phases_, PhaseTimes::kResidualBwdIn);
    RETURN_IF_ERROR(kernels::XhcBackwardOut(hw.config, hw.params, dX, &s.cache, d_out.data()));
  } else {
    std::copy(dX, dX + d_out.size(), d_out.begin());  // N = 1: dX is (n, C)
  }
  {
    PhaseScope timed(phases_, PhaseTimes::kSublayerBwdIn);
    if (is_mlp) {
      RETURN_IF_ERROR(MlpBackwardInput(cfg_, lw.mlp, B, d_out.data(), du.data(), &s.mlp));
    } else {
      RETURN_IF_ERROR(AttentionBackwardInput(cfg_, lw.attn, B, d_out.data(), du.data(), &s.attn));
    }
  }
  const ModelConfig& cfg = cfg_;
  if (hc) {
    PhaseScope timed(phases_, PhaseTimes::kResidualBwdIn);
    if (s.cache.dims.flash) {
      RestoreSublayerInput(*st, sub_idx, X);
      RETURN_IF_ERROR(
          kernels::XhcBackwardInput(hw.config, hw.params, X->data(), du.data(), dX, &s.cache));
    } else {  // the same restore, token by token inside the input pass
      RETURN_IF_ERROR(kernels::XhcBackwardInputRestoring(hw.config, hw.params, X->data(), du.data(),
                                                         dX, &s.cache));
    }
  } else {
    for (size_t i = 0; i < du.size(); ++i) dX[i] += du[i];
  }
  // The weight gradients, from the sublayer's residual input Xs (as the input pass took it).
  PhaseTimes* phases = phases_;
  auto weights = [&cfg, &lw, &hw, &s, is_mlp, hc, B, phases](const T* Xs) -> absl::Status {
    {
      PhaseScope timed(phases, PhaseTimes::kSublayerBwdW);
      if (is_mlp) {
        RETURN_IF_ERROR(MlpBackwardWeight(cfg, lw.mlp, B, s.mlp));
      } else {
        RETURN_IF_ERROR(AttentionBackwardWeight(cfg, lw.attn, B, s.attn));
      }
    }
    if (!hc) return absl::OkStatus();
    PhaseScope timed(phases, PhaseTimes::kResidualBwdW);
    return kernels::XhcBackwardWeights(hw.config, hw.params, Xs, s.cache, hw.grads);
  };
  if (weights_now) {
    // X: the input the pass has just taken, kept until the next sublayer's pass. xhc_flash's
    // weight gradients need the whole window's input passes (down to its entry sublayer,
    // position 0), which leave X at the window's entry state: queued until then.
    st->pending_w.push_back({sub_idx, [weights, X] { return weights(X->data()); }});
    const bool window_done = !s.cache.dims.flash || s.cache.dims.pos == 0;
    return window_done ? RunQueuedWeights(st) : absl::OkStatus();
  }
  // Queued in backward order (last sublayer first): the weight pass rebuilds each sublayer's
  // input from X_out in the same order as the input pass did.
  st->pending_w.push_back({sub_idx, [st, sub_idx, hc, phases, weights]() -> absl::Status {
                             if (hc) {
                               PhaseScope timed(phases, PhaseTimes::kResidualBwdW);
                               // X_out's last reader, the head's weight pass, ran before this one
                               // (the queue is FIFO and BackwardHead queues first), so the weight
                               // pass takes it over instead of copying 32 MiB.
                               if (!st->X_w_ready)
                                 st->X_w = std::move(st->X_out), st->X_w_ready = true;
                               RestoreSublayerInput(*st, sub_idx, &st->X_w);
                             }
                             return weights(st->X_w.data());
                           }});
  return absl::OkStatus();
}

template <typename T>
absl::Status StageModelT<T>::BackwardHead(MicrobatchState<T>* st, double loss_scale, T* dX) {
  PhaseScope timed(phases_, PhaseTimes::kHeadBwd);
  const int C = cfg_.d_model, V = cfg_.vocab_size, N = cfg_.residual.n_streams;
  const int n = st->B * cfg_.seq_len;
  st->dlogits.resize(st->logits.size());
  RETURN_IF_ERROR(nn::CrossEntropyBackward(st->dlogits.data(), st->logits.data(), st->lse.data(),
                                           st->targets.data(), n, V, static_cast<T>(loss_scale)));
  std::vector<T> dz(static_cast<size_t>(n) * C);
  RETURN_IF_ERROR(nn::MatmulBackwardInput(dz.data(), st->dlogits.data(),
                                          head_.lm_head->value.data(), n, C, V, false));
  st->dy.assign(dz.size(), T(0));
  RETURN_IF_ERROR(nn::RmsnormBackwardInput(st->dy.data(), dz.data(), st->y.data(),
                                           head_.final_norm->value.data(), st->rstd_f.data(), n,
                                           C));
  if (N > 1) {
    RETURN_IF_ERROR(kernels::HeadReduceBackwardInput(head_.hc, n, N, C, st->X_out.data(),
                                                     st->dy.data(), &st->head_cache, dX));
  } else {
    std::copy(st->dy.begin(), st->dy.end(), dX);
  }
  auto head_weights = [this, st, n, C, V, N, dz = std::move(dz)]() -> absl::Status {
    PhaseScope timed(phases_, PhaseTimes::kHeadBwd);
    RETURN_IF_ERROR(nn::MatmulBackwardWeight(head_.lm_head->grad.data(), st->dlogits.data(),
                                             st->z.data(), n, C, V));
    RETURN_IF_ERROR(nn::RmsnormBackwardWeight(head_.final_norm->grad.data(), dz.data(),
                                              st->y.data(), st->rstd_f.data(), n, C));
    if (N == 1) return absl::OkStatus();
    return kernels::HeadReduceBackwardWeights(head_.hc, n, N, C, st->X_out.data(), st->head_cache,
                                              head_.hc_grads);
  };
  st->pending_w.push_back({HeadGroup(spec_), std::move(head_weights)});
  std::vector<T>().swap(st->logits);  // only dlogits is needed from here on
  return absl::OkStatus();
}

template <typename T>
absl::Status StageModelT<T>::BackwardInput(int mb, double loss_scale, const T* dx_out, T* dx_in) {
  return BackwardInputPass(mb, loss_scale, dx_out, dx_in, /*weights_now=*/false);
}

template <typename T>
absl::Status StageModelT<T>::Backward(int mb, double loss_scale, const T* dx_out, T* dx_in) {
  RETURN_IF_ERROR(BackwardInputPass(mb, loss_scale, dx_out, dx_in, /*weights_now=*/true));
  return BackwardWeight(mb);  // nothing queued: adds the gradients up and frees mb
}

template <typename T>
absl::Status StageModelT<T>::RunQueuedWeights(MicrobatchState<T>* st) {
  while (!st->pending_w.empty()) {
    RETURN_IF_ERROR(st->pending_w.front().run());
    st->pending_w.pop_front();
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status StageModelT<T>::BackwardInputPass(int mb, double loss_scale, const T* dx_out, T* dx_in,
                                               bool weights_now) {
  auto it = inflight_.find(mb);
  if (it == inflight_.end() || it->second->backward_done) {
    return absl::FailedPreconditionError(
        absl::StrCat("backward of micro-batch ", mb, " without a pending forward"));
  }
  MicrobatchState<T>* st = it->second.get();
  // dX, the gradient of the state, lives in dx_in where the stage has one (a middle stage's
  // caller may pass dx_out's buffer as dx_in: then nothing is copied), else in bwd_dX_.
  const size_t size = static_cast<size_t>(StateElements(st->B));
  T* dX = dx_in;
  if (spec_.has_embed) {
    if (spec_.has_head) {
      bwd_dX_.resize(size);  // BackwardHead writes every element
    } else {
      bwd_dX_.assign(dx_out, dx_out + size);
    }
    dX = bwd_dX_.data();
  } else if (!spec_.has_head && dX != dx_out) {
    std::copy(dx_out, dx_out + size, dX);
  }
  if (spec_.has_head) RETURN_IF_ERROR(BackwardHead(st, loss_scale, dX));
  // X_out rebuilt into each sublayer's input on the way down (empty for vanilla): a copy
  // when the weight pass comes later (it rebuilds the inputs from X_out again), else X_out
  // itself, once the head's weight pass (its last other reader) has run.
  std::vector<T>* X = &bwd_X_;
  if (weights_now) {
    RETURN_IF_ERROR(RunQueuedWeights(st));
    X = &st->X_out;
  } else {
    bwd_X_.assign(st->X_out.begin(), st->X_out.end());
  }
  for (int s = static_cast<int>(st->subs.size()) - 1; s >= 0; --s) {
    RETURN_IF_ERROR(BackwardSublayer(st, s, dX, X, weights_now));
  }
  const int C = cfg_.d_model, N = cfg_.residual.n_streams, n = st->B * cfg_.seq_len;
  if (spec_.has_embed) {
    PhaseScope timed(phases_, PhaseTimes::kEmbed);
    std::vector<T> de(static_cast<size_t>(n) * C, T(0));
    kernels::ExpandBackward(n, N, C, dX, de.data());
    auto embed_weights = [this, st, n, C, de = std::move(de)]() -> absl::Status {
      PhaseScope timed(phases_, PhaseTimes::kEmbed);
      // Token order is fixed, so the scatter-add is deterministic.
      for (int i = 0; i < n; ++i) {
        T* row = &embed_->grad[static_cast<size_t>(st->tokens[i]) * C];
        const T* g = &de[static_cast<size_t>(i) * C];
        for (int c = 0; c < C; ++c) row[c] += g[c];
      }
      return absl::OkStatus();
    };
    st->pending_w.push_back({EmbedGroup(spec_), std::move(embed_weights)});
  }
  if (weights_now) RETURN_IF_ERROR(RunQueuedWeights(st));
  st->backward_done = true;
  return absl::OkStatus();
}

template <typename T>
absl::Status StageModelT<T>::RunQueuedWeightsByGroup(MicrobatchState<T>* st,
                                                     const ParamsDone& done) {
  std::vector<bool> finished(weight_groups_.size(), false);
  auto finish = [&](int g) -> absl::Status {
    finished[g] = true;
    if (weight_groups_[g].empty()) return absl::OkStatus();
    params_->AccumulateGroup(weight_groups_[g]);
    return done(weight_groups_[g]);
  };
  while (!st->pending_w.empty()) {
    const int group = st->pending_w.front().group;
    RETURN_IF_ERROR(st->pending_w.front().run());
    st->pending_w.pop_front();
    const bool more = std::any_of(st->pending_w.begin(), st->pending_w.end(),
                                  [group](const auto& w) { return w.group == group; });
    if (!more) RETURN_IF_ERROR(finish(group));
  }
  for (size_t g = 0; g < finished.size(); ++g) {  // groups no part of this pass wrote
    if (!finished[g]) RETURN_IF_ERROR(finish(static_cast<int>(g)));
  }
  params_->EndGroupedAccumulation();
  return absl::OkStatus();
}

template <typename T>
absl::Status StageModelT<T>::BackwardWeight(int mb, const ParamsDone& done) {
  auto it = inflight_.find(mb);
  if (it == inflight_.end() || !it->second->backward_done) {
    return absl::FailedPreconditionError(
        absl::StrCat("weight gradient of micro-batch ", mb, " before its input gradient"));
  }
  MicrobatchState<T>* st = it->second.get();
  if (done) {
    RETURN_IF_ERROR(RunQueuedWeightsByGroup(st, done));
  } else {
    RETURN_IF_ERROR(RunQueuedWeights(st));
    params_->AccumulateGrads();
  }
  std::unique_ptr<MicrobatchState<T>> finished = std::move(it->second);
  inflight_.erase(it);
  Recycle(std::move(finished));
  return absl::OkStatus();
}

#define XHC_INSTANTIATE_STAGE_BACKWARD(T)                                                   \
  template absl::Status StageModelT<T>::BackwardInput(int, double, const T*, T*);           \
  template absl::Status StageModelT<T>::Backward(int, double, const T*, T*);                \
  template absl::Status StageModelT<T>::BackwardInputPass(int, double, const T*, T*, bool); \
  template absl::Status StageModelT<T>::RunQueuedWeights(MicrobatchState<T>*);              \
  template absl::Status StageModelT<T>::RunQueuedWeightsByGroup(MicrobatchState<T>*,        \
                                                                const ParamsDone&);         \
  template absl::Status StageModelT<T>::BackwardWeight(int, const ParamsDone&);             \
  template absl::Status StageModelT<T>::BackwardSublayer(MicrobatchState<T>*, int, T*,      \
                                                         std::vector<T>*, bool);            \
  template absl::Status StageModelT<T>::BackwardHead(MicrobatchState<T>*, double, T*);

XHC_INSTANTIATE_STAGE_BACKWARD(float)
XHC_INSTANTIATE_STAGE_BACKWARD(double)

}  // namespace xhc::model
