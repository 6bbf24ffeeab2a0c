#include "runtime/model/params.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/hash.h"

namespace xhc::model {
namespace {

uint64_t HashName(const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A standard normal draw for element i of the parameter keyed `key` (Box–Muller on two
// SplitMix64 uniforms): portable, unlike std::normal_distribution.
double NormalAt(uint64_t key, int64_t i) {
  const uint64_t a = Mix64(key + 2 * static_cast<uint64_t>(i));
  const uint64_t b = Mix64(key + 2 * static_cast<uint64_t>(i) + 1);
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

// Window position of sublayer q = 2l + is_mlp under xhc_flash (spec 4.5); 0 otherwise.
int WindowPos(const ResidualConfig& r, int layer, bool is_mlp) {
  return r.type == ResidualType::kXhcFlash ? (2 * layer + (is_mlp ? 1 : 0)) % r.window : 0;
}

// hc (spec 4.4): per-stream maps from one [1, C] (pre, post) or [N, C] (res) weight.
template <typename T>
void AddHcOriginal(const ModelConfig& cfg, const std::string& p, ParamSetT<T>* ps) {
  const int64_t N = cfg.residual.n_streams, C = cfg.d_model;
  ps->Add(p + "pre.weight", {1, C}, true);
  ps->Add(p + "pre.bias", {N}, false);
  ps->Add(p + "pre.alpha", {}, false);
  ps->Add(p + "res.weight", {N, C}, true);
  ps->Add(p + "res.bias", {N * N}, false);
  ps->Add(p + "res.alpha", {}, false);
  ps->Add(p + "post.weight", {1, C}, true);
  ps->Add(p + "post.bias", {N}, false);
  ps->Add(p + "post.alpha", {}, false);
}

// mhc, xhc, xhc_flash (spec 4.2, 4.3, 4.5).
template <typename T>
void AddHc(const ModelConfig& cfg, int layer, bool is_mlp, ParamSetT<T>* ps) {
  const ResidualConfig& r = cfg.residual;
  const std::string p = HcPrefix(layer, is_mlp);
  if (r.type == ResidualType::kHc) return AddHcOriginal(cfg, p, ps);
  const int64_t N = r.n_streams, C = cfg.d_model;
  const bool mhc = r.type == ResidualType::kMhc;
  const bool flash = r.type == ResidualType::kXhcFlash;
  const int pos = WindowPos(r, layer, is_mlp);
  const bool router = r.type == ResidualType::kXhc || (flash && pos == 0);
  const bool res = !flash || pos == r.window - 1;
  const int64_t k = mhc ? N : r.n_active;
  const int64_t K = is_mlp ? 1 + static_cast<int64_t>(r.conv_kernels.size()) : 1;
  if (router) {
    ps->Add(p + "router.weight", {N, N * C}, true);
    ps->Add(p + "router.bias", {N}, false);
  }
  ps->Add(p + "pre.weight", {N, N * C}, true);
  ps->Add(p + "pre.bias", {N}, false);
  ps->Add(p + "pre.alpha", {}, false);
  if (res) {
    ps->Add(p + "res.weight", {k * k, k * C}, true);
    ps->Add(p + "res.bias", {k * k}, false);
    ps->Add(p + "res.alpha", {}, false);
  }
  ps->Add(p + "post.weight", {k * K, k * C}, true);
  ps->Add(p + "post.bias", {k * K}, false);
  ps->Add(p + "post.alpha", {}, false);
  if (is_mlp) {
    for (size_t j = 0; j < r.conv_kernels.size(); ++j) {
      ps->Add(absl::StrCat(p, "conv.", j, ".weight"), {r.conv_kernels[j], C}, false);
    }
  }
}

template <typename T>
void AddLayer(const ModelConfig& cfg, int l, ParamSetT<T>* ps) {
  const int64_t C = cfg.d_model, dh = cfg.head_dim(), F = cfg.d_ff;
  const int64_t H = cfg.n_heads, Hkv = cfg.n_kv_heads;
  const std::string p = absl::StrCat("layers.", l, ".");
  const bool hc = cfg.residual.type != ResidualType::kVanilla;
  if (hc) AddHc(cfg, l, false, ps);
  ps->Add(p + "attn_norm.weight", {C}, false);
  ps->Add(p + "attn.wq.weight", {H * dh, C}, true);
  ps->Add(p + "attn.wk.weight", {Hkv * dh, C}, true);
  ps->Add(p + "attn.wv.weight", {Hkv * dh, C}, true);
  ps->Add(p + "attn.wo.weight", {C, H * dh}, true);
  if (hc) AddHc(cfg, l, true, ps);
  ps->Add(p + "mlp_norm.weight", {C}, false);
  ps->Add(p + "mlp.w1.weight", {F, C}, true);
  ps->Add(p + "mlp.w3.weight", {F, C}, true);
  ps->Add(p + "mlp.w2.weight", {C, F}, true);
}

// Spec 4.4's init of an hc sublayer's maps (`name` = layers.{l}.{attn,mlp}_hc.*): weights 0,
// alpha 0.01, pre.bias one-hot at q mod N (q = 2l, or 2l+1 for the MLP), post.bias 1, res.bias
// the identity. Returns false for other names.
bool InitHcOriginal(const ModelConfig& cfg, const std::string& name, std::vector<double>* out) {
  int layer = 0, consumed = 0;
  if (std::sscanf(name.c_str(), "layers.%d.%n", &layer, &consumed) != 1 || consumed == 0) {
    return false;
  }
  const std::string rest = name.substr(static_cast<size_t>(consumed));
  const bool mlp = absl::StartsWith(rest, "mlp_hc.");
  if (!mlp && !absl::StartsWith(rest, "attn_hc.")) return false;
  std::vector<double>& v = *out;
  const int64_t N = cfg.residual.n_streams;
  const int64_t q = 2 * layer + (mlp ? 1 : 0);
  std::fill(v.begin(), v.end(), 0.0);
  if (absl::EndsWith(name, ".alpha")) {
    v[0] = 0.01;
  } else if (absl::EndsWith(name, "pre.bias")) {
    v[q % N] = 1.0;
  } else if (absl::EndsWith(name, "post.bias")) {
    std::fill(v.begin(), v.end(), 1.0);
  } else if (absl::EndsWith(name, "res.bias")) {
    for (int64_t i = 0; i < N; ++i) v[i * N + i] = 1.0;
  }
  return true;
}

// Spec section 5: the initial value of every element of `name`.
void InitOne(const ModelConfig& cfg, uint64_t seed, const std::string& name,
             std::vector<double>* out) {
  if (cfg.residual.type == ResidualType::kHc && InitHcOriginal(cfg, name, out)) return;
  const double residual_std = 0.02 / std::sqrt(2.0 * cfg.n_layers);
  std::vector<double>& v = *out;
  auto fill = [&](double value) { std::fill(v.begin(), v.end(), value); };
  auto normal = [&](double std) {
    const uint64_t key = Mix64(seed ^ HashName(name));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std * NormalAt(key, static_cast<int64_t>(i));
  };
  if (absl::EndsWith(name, "norm.weight")) return fill(1.0);
  if (absl::EndsWith(name, ".alpha")) return fill(0.01);
  if (absl::StrContains(name, ".conv.")) return fill(0.0);
  if (absl::EndsWith(name, "res.bias")) {
    const int64_t k = static_cast<int64_t>(std::llround(std::sqrt(double(v.size()))));
    for (int64_t i = 0; i < k * k; ++i) v[i] = (i / k == i % k) ? 0.0 : -4.0;
    return;
  }
  if (absl::EndsWith(name, ".bias")) return fill(0.0);
  if (absl::EndsWith(name, "attn.wo.weight") || absl::EndsWith(name, "mlp.w2.weight")) {
    return normal(residual_std);
  }
  normal(0.02);  // every other weight: linears, embedding, lm_head, residual maps
}

// Cuts `p` into pieces of at most kParamPieceElements, in element order.
template <typename T>
void AppendPieces(ParamT<T>* p, std::vector<ParamPiece<T>>* pieces) {
  const int64_t n = p->numel();
  for (int64_t begin = 0; begin < n; begin += kParamPieceElements) {
    pieces->push_back({p, begin, std::min(n, begin + kParamPieceElements)});
  }
}

}  // namespace

std::string HcPrefix(int layer, bool is_mlp) {
  return absl::StrCat("layers.", layer, is_mlp ? ".mlp_hc." : ".attn_hc.");
}

template <typename T>
ParamT<T>* ParamSetT<T>::Add(const std::string& name, std::vector<int64_t> shape, bool decay) {
  auto p = std::make_unique<ParamT<T>>();
  p->name = name;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  p->shape = std::move(shape);
  p->decay = decay;
  p->value.assign(static_cast<size_t>(n), T(0));
  p->grad.assign(static_cast<size_t>(n), T(0));
  p->grad_acc.assign(static_cast<size_t>(n), 0.0);
  ParamT<T>* raw = p.get();
  AppendPieces(raw, &pieces_);
  by_name_[name] = raw;
  params_.push_back(std::move(p));
  return raw;
}

template <typename T>
ParamT<T>* ParamSetT<T>::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

// The sweeps below are elementwise, so how the pieces fall on threads cannot change a bit.
template <typename T>
void ParamSetT<T>::ZeroGrads() {
  const int64_t count = static_cast<int64_t>(pieces_.size());
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) {
    const ParamPiece<T>& piece = pieces_[k];
    std::fill(piece.param->grad.begin() + piece.begin, piece.param->grad.begin() + piece.end, T(0));
  }
  acc_started_ = false;
}

namespace {

// grad_acc[begin, end) += grad (= 0.0 + grad on a step's first pass), then grad = 0.
template <typename T>
void AccumulatePiece(const ParamPiece<T>& piece, bool first) {
  T* grad = piece.param->grad.data();
  double* acc = piece.param->grad_acc.data();
  if (first) {  // 0.0 + g, not g: a -0.0 gradient becomes +0.0, as when added to a zero sum
#pragma omp simd
    for (int64_t i = piece.begin; i < piece.end; ++i) acc[i] = 0.0 + static_cast<double>(grad[i]);
  } else {
#pragma omp simd
    for (int64_t i = piece.begin; i < piece.end; ++i) acc[i] += static_cast<double>(grad[i]);
  }
  std::fill(grad + piece.begin, grad + piece.end, T(0));
}

}  // namespace

template <typename T>
void ParamSetT<T>::AccumulateGrads() {
  const int64_t count = static_cast<int64_t>(pieces_.size());
  const bool first = !acc_started_;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) AccumulatePiece(pieces_[k], first);
  acc_started_ = true;
}

template <typename T>
void ParamSetT<T>::AccumulateGroup(const std::vector<ParamT<T>*>& group) {
  std::vector<ParamPiece<T>> pieces;
  for (ParamT<T>* p : group) AppendPieces(p, &pieces);
  const int64_t count = static_cast<int64_t>(pieces.size());
  const bool first = !acc_started_;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) AccumulatePiece(pieces[k], first);
}

template <typename T>
void ParamSetT<T>::FinalizeGrads() {
  MaterializeSums();  // zeros if no micro-batch ran since ZeroGrads
  const int64_t count = static_cast<int64_t>(pieces_.size());
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) {
    T* grad = pieces_[k].param->grad.data();
    const double* acc = pieces_[k].param->grad_acc.data();
    const int64_t begin = pieces_[k].begin, end = pieces_[k].end;
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) grad[i] = static_cast<T>(acc[i]);
  }
}

template <typename T>
void ParamSetT<T>::MaterializeSums() {
  if (acc_started_) return;
  const int64_t count = static_cast<int64_t>(pieces_.size());
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) {
    double* acc = pieces_[k].param->grad_acc.data();
    std::fill(acc + pieces_[k].begin, acc + pieces_[k].end, 0.0);
  }
  acc_started_ = true;
}

template <typename T>
ParamSetT<T> BuildStageParams(const ModelConfig& cfg, const StageSpec& spec) {
  ParamSetT<T> ps;
  const int64_t C = cfg.d_model, V = cfg.vocab_size, N = cfg.residual.n_streams;
  if (spec.has_embed) ps.Add("embed.weight", {V, C}, false);
  for (int l = spec.first_layer; l < spec.first_layer + spec.num_layers; ++l) AddLayer(cfg, l, &ps);
  if (spec.has_head) {
    if (N > 1) {
      ps.Add("head_hc.weight", {N, N * C}, true);
      ps.Add("head_hc.bias", {N}, false);
      ps.Add("head_hc.alpha", {}, false);
    }
    ps.Add("final_norm.weight", {C}, false);
    ps.Add("lm_head.weight", {V, C}, true);
  }
  return ps;
}

template <typename T>
void InitParams(const ModelConfig& cfg, uint64_t seed, ParamSetT<T>* params) {
  std::vector<double> values;
  for (const auto& p : params->all()) {
    values.assign(p->value.size(), 0.0);
    InitOne(cfg, seed, p->name, &values);
    for (size_t i = 0; i < values.size(); ++i) {
      // Round through float so the float and double models start from the same weights.
      p->value[i] = static_cast<T>(static_cast<float>(values[i]));
    }
  }
}

template class ParamSetT<float>;
template class ParamSetT<double>;
template ParamSetT<float> BuildStageParams<float>(const ModelConfig&, const StageSpec&);
template ParamSetT<double> BuildStageParams<double>(const ModelConfig&, const StageSpec&);
template void InitParams<float>(const ModelConfig&, uint64_t, ParamSetT<float>*);
template void InitParams<double>(const ModelConfig&, uint64_t, ParamSetT<double>*);

}  // namespace xhc::model
