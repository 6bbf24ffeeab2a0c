#include "runtime/model/stage_weights.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace xhc::model {
namespace {

// The stage's own BuildStageParams created every name asked for here; a miss is a
// programming error, not bad input.
template <typename T>
ParamT<T>* Must(const ParamSetT<T>& ps, const std::string& name) {
  ParamT<T>* p = ps.Find(name);
  if (p == nullptr) {
    std::fprintf(stderr, "internal error: parameter %s missing from its stage\n", name.c_str());
    std::abort();
  }
  return p;
}

template <typename T>
void Bind(const ParamSetT<T>& ps, const std::string& name, const T** value, T** grad) {
  ParamT<T>* param = Must(ps, name);
  *value = param->value.data();
  *grad = param->grad.data();
}

template <typename T>
HcWeights<T> ResolveHc(const ModelConfig& cfg, int layer, bool is_mlp, const ParamSetT<T>& ps) {
  HcWeights<T> w;
  w.config = MakeXhcConfig(cfg, layer, is_mlp);
  const kernels::XhcConfig& kc = w.config;
  const std::string p = HcPrefix(layer, is_mlp);
  auto bind = [&](const std::string& name, const T** value, T** grad) {
    Bind(ps, p + name, value, grad);
  };
  const bool flash = kc.type == kernels::ResidualType::kXhcFlash;
  if (kc.type == kernels::ResidualType::kXhc || (flash && kc.window_pos == 0)) {
    bind("router.weight", &w.params.router_weight, &w.grads.router_weight);
    bind("router.bias", &w.params.router_bias, &w.grads.router_bias);
  }
  bind("pre.weight", &w.params.pre_weight, &w.grads.pre_weight);
  bind("pre.bias", &w.params.pre_bias, &w.grads.pre_bias);
  bind("pre.alpha", &w.params.pre_alpha, &w.grads.pre_alpha);
  if (!flash || kc.window_pos == kc.window - 1) {
    bind("res.weight", &w.params.res_weight, &w.grads.res_weight);
    bind("res.bias", &w.params.res_bias, &w.grads.res_bias);
    bind("res.alpha", &w.params.res_alpha, &w.grads.res_alpha);
  }
  bind("post.weight", &w.params.post_weight, &w.grads.post_weight);
  bind("post.bias", &w.params.post_bias, &w.grads.post_bias);
  bind("post.alpha", &w.params.post_alpha, &w.grads.post_alpha);
  if (is_mlp) {
    for (size_t j = 0; j < kc.conv_kernels.size(); ++j) {
      ParamT<T>* conv = Must(ps, absl::StrCat(p, "conv.", j, ".weight"));
      w.params.conv_weight.push_back(conv->value.data());
      w.grads.conv_weight.push_back(conv->grad.data());
    }
  }
  if (flash && kc.window_pos == 0) {
    // The window entry projects every sublayer's read map from the entry state (spec 4.5
    // step 2): the plan keeps a window inside one stage, so all of them are here.
    for (int q = 0; q < kc.window; ++q) {
      const int sub = 2 * layer + q;
      const std::string pq = HcPrefix(sub / 2, sub % 2 == 1);
      w.params.window_pre_weight.push_back(Must(ps, pq + "pre.weight")->value.data());
      w.params.window_pre_bias.push_back(Must(ps, pq + "pre.bias")->value.data());
      w.params.window_pre_alpha.push_back(Must(ps, pq + "pre.alpha")->value.data());
    }
  }
  return w;
}

}  // namespace

kernels::XhcConfig MakeXhcConfig(const ModelConfig& cfg, int layer, bool is_mlp) {
  kernels::XhcConfig c;
  const ResidualConfig& r = cfg.residual;
  const bool all_streams = r.type == ResidualType::kMhc || r.type == ResidualType::kHc;
  switch (r.type) {
    case ResidualType::kHc: c.type = kernels::ResidualType::kHc; break;
    case ResidualType::kMhc: c.type = kernels::ResidualType::kMhc; break;
    case ResidualType::kXhcFlash:
      c.type = kernels::ResidualType::kXhcFlash;
      c.window = r.window;
      c.window_pos = (2 * layer + (is_mlp ? 1 : 0)) % r.window;
      break;
    default: c.type = kernels::ResidualType::kXhc;
  }
  c.n_streams = r.n_streams;
  c.n_active = all_streams ? r.n_streams : r.n_active;
  c.n_fixed = all_streams ? r.n_streams : r.n_fixed;
  c.conv_kernels = r.conv_kernels;  // config parsing already emptied it for hc
  c.gram_schmidt = r.gram_schmidt;
  c.sinkhorn_iters = r.sinkhorn_iters;
  c.is_mlp = is_mlp;
  return c;
}

template <typename T>
LayerWeights<T> ResolveLayer(const ModelConfig& cfg, int layer, const ParamSetT<T>& ps) {
  LayerWeights<T> w;
  w.layer = layer;
  const std::string p = absl::StrCat("layers.", layer, ".");
  if (cfg.residual.type != ResidualType::kVanilla) {
    w.attn_hc = ResolveHc(cfg, layer, false, ps);
    w.mlp_hc = ResolveHc(cfg, layer, true, ps);
  }
  w.attn = {Must(ps, p + "attn_norm.weight"), Must(ps, p + "attn.wq.weight"),
            Must(ps, p + "attn.wk.weight"), Must(ps, p + "attn.wv.weight"),
            Must(ps, p + "attn.wo.weight")};
  w.mlp = {Must(ps, p + "mlp_norm.weight"), Must(ps, p + "mlp.w1.weight"),
           Must(ps, p + "mlp.w3.weight"), Must(ps, p + "mlp.w2.weight")};
  return w;
}

template <typename T>
HeadWeights<T> ResolveHead(const ModelConfig& cfg, const ParamSetT<T>& ps) {
  HeadWeights<T> w;
  if (cfg.residual.n_streams > 1) {
    ParamT<T>* weight = Must(ps, std::string("head_hc.weight"));
    ParamT<T>* bias = Must(ps, std::string("head_hc.bias"));
    ParamT<T>* alpha = Must(ps, std::string("head_hc.alpha"));
    w.hc = {weight->value.data(), bias->value.data(), alpha->value.data()};
    w.hc_grads = {weight->grad.data(), bias->grad.data(), alpha->grad.data()};
  }
  w.final_norm = Must(ps, std::string("final_norm.weight"));
  w.lm_head = Must(ps, std::string("lm_head.weight"));
  return w;
}

template <typename T>
std::vector<std::vector<ParamT<T>*>> GroupByWeightPass(const StageSpec& spec,
                                                       const ParamSetT<T>& ps) {
  std::vector<std::vector<ParamT<T>*>> groups(EmbedGroup(spec) + 1);
  for (const auto& param : ps.all()) {
    const std::string& name = param->name;
    int group = HeadGroup(spec);
    if (name == "embed.weight") {
      group = EmbedGroup(spec);
    } else if (absl::StartsWith(name, "layers.")) {
      // layers.<l>.<attn|attn_norm|attn_hc|mlp|mlp_norm|mlp_hc>.<...>
      const std::vector<std::string> parts = absl::StrSplit(name, '.');
      int layer = -1;
      const int i =
          parts.size() > 2 && absl::SimpleAtoi(parts[1], &layer) ? layer - spec.first_layer : -1;
      const bool attn = parts.size() > 2 && absl::StartsWith(parts[2], "attn");
      const bool mlp = parts.size() > 2 && absl::StartsWith(parts[2], "mlp");
      if (i < 0 || i >= spec.num_layers || attn == mlp) {
        std::fprintf(stderr, "internal error: no weight-pass group for parameter %s\n",
                     name.c_str());
        std::abort();
      }
      group = 2 * i + (mlp ? 1 : 0);
    } else if (!spec.has_head) {
      std::fprintf(stderr, "internal error: head parameter %s on a stage without the head\n",
                   name.c_str());
      std::abort();
    }
    groups[group].push_back(param.get());
  }
  return groups;
}

template std::vector<std::vector<ParamT<float>*>> GroupByWeightPass(const StageSpec&,
                                                                    const ParamSetT<float>&);
template std::vector<std::vector<ParamT<double>*>> GroupByWeightPass(const StageSpec&,
                                                                     const ParamSetT<double>&);
template LayerWeights<float> ResolveLayer<float>(const ModelConfig&, int, const ParamSetT<float>&);
template LayerWeights<double> ResolveLayer<double>(const ModelConfig&, int,
                                                   const ParamSetT<double>&);
template HeadWeights<float> ResolveHead<float>(const ModelConfig&, const ParamSetT<float>&);
template HeadWeights<double> ResolveHead<double>(const ModelConfig&, const ParamSetT<double>&);

}  // namespace xhc::model
