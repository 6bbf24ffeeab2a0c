#include "runtime/lab/ablation/diagnostics.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/model/stage.h"

namespace xhc::ablation {
namespace {

// The effective N × N matrix of every token of one sublayer, from the maps it computed.
std::vector<double> SublayerMatrices(int n, int N, const kernels::XhcCacheT<float>& c) {
  const size_t NN = static_cast<size_t>(N) * N;
  std::vector<double> m(n * NN);
  const int k = c.dims.k;
  std::vector<int> identity(k);
  for (int j = 0; j < k; ++j) identity[j] = j;
  for (int t = 0; t < n; ++t) {
    std::vector<double> one;
    if (!c.dims.has_mix) {  // a flash window's inner sublayer: only writes, no mixing
      one.assign(NN, 0.0);
      for (int i = 0; i < N; ++i) one[i * N + i] = 1.0;
    } else {
      // hc and mhc mix every stream in order (k = N): their idx, when kept, is 0..N-1.
      const int* idx = c.idx.empty() ? identity.data() : &c.idx[static_cast<size_t>(t) * k];
      one = EmbedActive(N, k, idx, &c.hres[static_cast<size_t>(t) * k * k]);
    }
    std::copy(one.begin(), one.end(), m.begin() + t * NN);
  }
  return m;
}

}  // namespace

std::string ResidualGroup(const std::string& name) {
  if (name.rfind("head_hc.", 0) == 0) return "head_hc";
  const size_t hc = name.find("_hc.");
  if (name.rfind("layers.", 0) != 0 || hc == std::string::npos) return "";
  const size_t side = name.rfind('.', hc);
  const size_t kind_end = name.find('.', hc + 4);
  return name.substr(side + 1, kind_end - side - 1);  // "mlp_hc.res"
}

absl::StatusOr<Diagnostics> ComputeDiagnostics(const ModelConfig& config,
                                               model::ParamSetT<float>* params,
                                               const TokenBatch& batch) {
  Diagnostics d;
  d.residual = ResidualTypeName(config.residual.type);
  const int N = config.residual.n_streams;
  d.n_streams = N;
  const int n = batch.batch * batch.seq_len;
  model::StageModel model(config, model::StageSpec::Full(config), params);
  CompositeMixing composite(n, N);
  std::vector<double> load(N, 0.0);
  int routed = 0;
  int observed = 0;
  model.set_sublayer_observer([&](int q, const kernels::XhcCacheT<float>& c) {
    (void)q;
    composite.Apply(SublayerMatrices(n, N, c));
    d.depth.push_back(composite.Stats());
    ++observed;
    if (c.dims.has_router) {
      ++routed;
      for (int t = 0; t < n * c.dims.k; ++t) load[c.idx[t]] += 1.0;
    }
  });
  ASSIGN_OR_RETURN(d.loss, model.ForwardOnly(batch.batch, batch.inputs.data(), batch.targets.data(),
                                             nullptr, nullptr, nullptr));
  model.set_sublayer_observer(nullptr);
  if (observed == 0) {  // vanilla: one stream, every sublayer's mixing is the scalar 1
    d.depth.assign(2 * config.n_layers, composite.Stats());
  }
  if (routed > 0) {
    for (double& l : load) l /= static_cast<double>(routed) * n;
    d.router_load = load;
  }
  params->ZeroGrads();
  ASSIGN_OR_RETURN(double loss, model.Forward(0, batch.batch, batch.inputs.data(),
                                              batch.targets.data(), nullptr, nullptr));
  (void)loss;
  RETURN_IF_ERROR(model.Backward(0, 1.0, nullptr, nullptr));
  params->FinalizeGrads();
  std::map<std::string, double> sq;
  for (const auto& p : params->all()) {
    const std::string g = ResidualGroup(p->name);
    if (g.empty()) continue;
    double s = 0;
    for (float v : p->grad) s += static_cast<double>(v) * v;
    sq[g] += s;
  }
  for (const auto& [g, s] : sq) d.grad_norms.push_back({g, std::sqrt(s)});
  return d;
}

std::string DiagnosticsJson(const Diagnostics& d) {
  nlohmann::json depth = nlohmann::json::array();
  for (const MixingStats& s : d.depth) {
    depth.push_back({{"forward_max", s.forward_max},
                     {"forward_mean", s.forward_mean},
                     {"backward_max", s.backward_max},
                     {"backward_mean", s.backward_mean},
                     {"self_share", s.self_share}});
  }
  nlohmann::json grads = nlohmann::json::object();
  for (const auto& [g, v] : d.grad_norms) grads[g] = v;
  return nlohmann::json{{"residual", d.residual}, {"n_streams", d.n_streams},
                        {"loss", d.loss},         {"depth", depth},
                        {"grad_norms", grads},    {"router_load", d.router_load}}
      .dump();
}

absl::StatusOr<Diagnostics> ParseDiagnosticsJson(const std::string& text) {
  Diagnostics d;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    d.residual = j.at("residual").get<std::string>();
    d.n_streams = j.at("n_streams").get<int>();
    d.loss = j.at("loss").get<double>();
    for (const auto& s : j.at("depth")) {
      d.depth.push_back({s.at("forward_max").get<double>(), s.at("forward_mean").get<double>(),
                         s.at("backward_max").get<double>(), s.at("backward_mean").get<double>(),
                         s.at("self_share").get<double>()});
    }
    for (const auto& [g, v] : j.at("grad_norms").items())
      d.grad_norms.push_back({g, v.get<double>()});
    d.router_load = j.at("router_load").get<std::vector<double>>();
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("diagnostics JSON: ", e.what()));
  }
  if (d.depth.empty()) return absl::InvalidArgumentError("diagnostics JSON: empty depth");
  return d;
}

}  // namespace xhc::ablation
