#ifndef XHC_RUNTIME_MODEL_STAGE_STATE_H_
#define XHC_RUNTIME_MODEL_STAGE_STATE_H_

// Private to stage*.cc: the activations one micro-batch keeps between its forward and its
// weight-gradient pass.

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/xhc/xhc_types.h"
#include "runtime/model/blocks.h"

namespace xhc::model {

// Everything one micro-batch keeps between its forward and its weight-gradient pass.
template <typename T>
struct SublayerState {
  kernels::XhcCacheT<T> cache;
  AttentionActs<T> attn;
  MlpActs<T> mlp;
};

// xhc_flash: position of a sublayer in its window (0 for every other type).
inline int WindowPos(const kernels::XhcConfig& c) {
  return c.type == kernels::ResidualType::kXhcFlash ? c.window_pos : 0;
}

template <typename T>
struct MicrobatchState {
  int B = 0;
  std::vector<int32_t> tokens, targets;
  std::vector<SublayerState<T>> subs;  // 2 per layer: attention, then MLP
  // Last stage.
  // (n, N, C) the state after the stage's last sublayer (the head reduce's input on the last
  // stage). The only saved copy of the residual state: every sublayer's input is rebuilt
  // from it in backward (RestoreSublayerInput; not for vanilla, whose sublayers need none).
  std::vector<T> X_out;
  std::vector<T> X_w;  // the weight pass's running copy, rebuilt sublayer by sublayer
  bool X_w_ready = false;
  bool for_backward = false;  // Forward (not ForwardOnly): keep what backward needs
  kernels::HeadCacheT<T> head_cache;
  std::vector<T> y, rstd_f, z, logits, lse, dlogits, dy;
  // Weight-gradient work queued by BackwardInput, run in order by BackwardWeight, each part
  // with the weight-pass group whose gradients it writes (GroupByWeightPass).
  struct PendingWeights {
    int group;
    std::function<absl::Status()> run;
  };
  std::deque<PendingWeights> pending_w;
  bool backward_done = false;
};

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_STAGE_STATE_H_
