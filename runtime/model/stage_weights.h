#ifndef XHC_RUNTIME_MODEL_STAGE_WEIGHTS_H_
#define XHC_RUNTIME_MODEL_STAGE_WEIGHTS_H_

// Resolves a stage's parameters by spec name into the pointer structs the kernels take, once,
// at construction (so the hot path never looks a name up).

#include <string>
#include <vector>

#include "kernels/cpu/xhc/xhc_types.h"
#include "runtime/common/config.h"
#include "runtime/model/blocks.h"
#include "runtime/model/params.h"

namespace xhc::model {

template <typename T>
struct HcWeights {
  kernels::XhcConfig config;
  kernels::XhcParamsT<T> params;
  kernels::XhcGradsT<T> grads;
};

template <typename T>
struct LayerWeights {
  int layer = 0;
  HcWeights<T> attn_hc, mlp_hc;  // unused for vanilla
  AttentionWeights<T> attn;
  MlpWeights<T> mlp;
};

template <typename T>
struct HeadWeights {
  kernels::HeadParamsT<T> hc;  // N > 1 only
  kernels::HeadGradsT<T> hc_grads;
  ParamT<T>* final_norm = nullptr;
  ParamT<T>* lm_head = nullptr;
};

// The kernel configuration of the residual sublayer of `layer` (attention or MLP side).
kernels::XhcConfig MakeXhcConfig(const ModelConfig& cfg, int layer, bool is_mlp);

template <typename T>
LayerWeights<T> ResolveLayer(const ModelConfig& cfg, int layer, const ParamSetT<T>& ps);

template <typename T>
HeadWeights<T> ResolveHead(const ModelConfig& cfg, const ParamSetT<T>& ps);

// The weight pass's groups (WeightGroup): the stage's parameters by the part of the pass
// that writes their gradient, so a group's gradient is complete once its part has run.
// Index 2i + (0 attention, 1 MLP) for the stage's i-th layer (the sublayer's block, its norm
// and its residual maps), then the head (head_hc, final_norm, lm_head), then the embedding.
template <typename T>
std::vector<std::vector<ParamT<T>*>> GroupByWeightPass(const StageSpec& spec,
                                                       const ParamSetT<T>& ps);
inline int HeadGroup(const StageSpec& spec) { return 2 * spec.num_layers; }
inline int EmbedGroup(const StageSpec& spec) { return 2 * spec.num_layers + 1; }

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_STAGE_WEIGHTS_H_
