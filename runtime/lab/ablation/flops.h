#ifndef XHC_RUNTIME_LAB_ABLATION_FLOPS_H_
#define XHC_RUNTIME_LAB_ABLATION_FLOPS_H_

// Training FLOPs per token of a model config, counted from model-spec.md: every matrix
// product of the backbone (spec §3: attention projections, causal attention, SwiGLU MLP, LM
// head) and of the residual maps (spec §4: router, read map, res / post maps, dense read,
// mix, write, temporal convolutions, Gram–Schmidt, Sinkhorn; §2 step 4: the head reduce).
// A multiply-add is 2 FLOPs. Training = 3 × forward (the backward of a product costs twice
// its forward: the input and the weight gradient). Norms, softmax, activations, RoPE and the
// optimizer are not counted (O(C) per token, the same for every residual type).

#include <string>

#include "runtime/common/config.h"

namespace xhc::ablation {

struct FlopCount {
  double backbone = 0;  // forward FLOPs per token: attention + MLP sublayers + LM head
  double residual = 0;  // forward FLOPs per token: residual maps of every sublayer + head reduce
  double forward() const { return backbone + residual; }
  double training() const { return 3 * forward(); }
};

// `model` must be validated (ParseConfig resolves d_ff and N). Causal attention scores count
// the average context (T + 1) / 2 of a token.
FlopCount FlopsPerToken(const ModelConfig& model);

// The formula as one line per term, for the report ("attention projections 2·C·(H+2Hkv)·dh + ...").
std::string FlopFormula();

}  // namespace xhc::ablation

#endif  // XHC_RUNTIME_LAB_ABLATION_FLOPS_H_
