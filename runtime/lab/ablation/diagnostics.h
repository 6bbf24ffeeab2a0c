#ifndef XHC_RUNTIME_LAB_ABLATION_DIAGNOSTICS_H_
#define XHC_RUNTIME_LAB_ABLATION_DIAGNOSTICS_H_

// Stability diagnostics of a model on one batch (`xhc eval --diagnostics`, and the ablation
// study at the end of each run):
// - the composite residual map over depth (mixing_gain.h): after every sublayer q, the
//   forward / backward gain and self-share of the product of the effective mixing matrices
//   of sublayers 0..q, from the maps the forward really computed on this batch;
// - gradient norms (L2) per residual parameter group (attn_hc.res, mlp_hc.post, head_hc, ...,
//   summed over layers) of the batch's mean loss;
// - the router's load per stream: the fraction of (token, routed sublayer) pairs in which
//   the stream is active (xhc, xhc_flash; empty for the others).

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"
#include "runtime/data/sampler.h"
#include "runtime/lab/ablation/mixing_gain.h"
#include "runtime/model/params.h"

namespace xhc::ablation {

struct Diagnostics {
  std::string residual;  // type name
  int n_streams = 1;
  double loss = 0;                 // the batch's mean loss
  std::vector<MixingStats> depth;  // [q]: composite of sublayers 0..q (2·L entries)
  std::vector<std::pair<std::string, double>> grad_norms;  // group -> L2 norm
  std::vector<double> router_load;                         // [stream]; empty without a router

  const MixingStats& final() const { return depth.back(); }
};

// Runs the batch forward (observing every sublayer's maps) and backward once on `params`
// (whose gradients it overwrites).
absl::StatusOr<Diagnostics> ComputeDiagnostics(const ModelConfig& config,
                                               model::ParamSetT<float>* params,
                                               const TokenBatch& batch);

// The residual parameter group of a spec name ("layers.2.mlp_hc.res.weight" -> "mlp_hc.res",
// "head_hc.alpha" -> "head_hc"); "" for backbone parameters.
std::string ResidualGroup(const std::string& name);

// One JSON object (the format `xhc eval --diagnostics` prints and the study reads back).
std::string DiagnosticsJson(const Diagnostics& d);
absl::StatusOr<Diagnostics> ParseDiagnosticsJson(const std::string& text);

}  // namespace xhc::ablation

#endif  // XHC_RUNTIME_LAB_ABLATION_DIAGNOSTICS_H_
