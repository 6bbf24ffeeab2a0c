#ifndef XHC_KERNELS_CPU_XHC_XHC_TEST_UTIL_H_
#define XHC_KERNELS_CPU_XHC_XHC_TEST_UTIL_H_

// Test helpers: owning storage for one sublayer's parameters (by spec name), random fill,
// and views as XhcParamsT / XhcGradsT.

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels::testing {

template <typename R>
struct ParamStore {
  std::vector<std::pair<std::string, std::vector<R>>> tensors;

  std::vector<R>& Get(const std::string& name) {
    for (auto& [n, v] : tensors)
      if (n == name) return v;
    tensors.emplace_back(name, std::vector<R>());
    return tensors.back().second;
  }
  // The tensor named `name`, or null.
  const std::vector<R>* Find(const std::string& name) const {
    for (const auto& [n, v] : tensors)
      if (n == name) return &v;
    return nullptr;
  }
  const R* Ptr(const std::string& name) const {
    const std::vector<R>* v = Find(name);
    return v ? v->data() : nullptr;
  }
  R* MutPtr(const std::string& name) {
    for (auto& [n, v] : tensors)
      if (n == name) return v.data();
    return nullptr;
  }

  // Shapes of spec 4; every entry random (never zero) with O(1) pre-activations.
  void Init(const XhcDims& d, std::mt19937_64& rng, bool zero = false) {
    std::normal_distribution<double> nd(0.0, 1.0);
    auto fill = [&](const std::string& name, size_t size, double scale, double offset = 0) {
      auto& v = Get(name);
      v.assign(size, R(0));
      if (!zero)
        for (auto& e : v) e = R(offset + scale * nd(rng));
    };
    const size_t D = d.D(), Da = d.Da();
    if (d.hc) {  // spec 4.4 shapes: [1, C] pre / post rows, [N, C] res rows
      fill("pre.weight", d.C, 1.0 / std::sqrt(double(d.C)));
      fill("pre.bias", d.N, 0.5);
      fill("pre.alpha", 1, 0.3, 1.0);
      fill("res.weight", d.N * d.C, 1.0 / std::sqrt(double(d.C)));
      fill("res.bias", d.N * d.N, 0.5);
      fill("res.alpha", 1, 0.3, 1.0);
      fill("post.weight", d.C, 1.0 / std::sqrt(double(d.C)));
      fill("post.bias", d.N, 0.5);
      fill("post.alpha", 1, 0.3, 1.0);
      return;
    }
    if (d.has_router) {
      fill("router.weight", d.N * D, 1.0 / std::sqrt(double(D)));
      fill("router.bias", d.N, 0.5);
    }
    fill("pre.weight", d.N * D, 1.0 / std::sqrt(double(D)));
    fill("pre.bias", d.N, 0.5);
    fill("pre.alpha", 1, 0.3, 1.0);
    if (d.has_mix) {
      fill("res.weight", d.k * d.k * Da, 1.0 / std::sqrt(double(Da)));
      fill("res.bias", d.k * d.k, 0.5);
      fill("res.alpha", 1, 0.3, 1.0);
    }
    fill("post.weight", d.k * d.K * Da, 1.0 / std::sqrt(double(Da)));
    fill("post.bias", d.k * d.K, 0.5);
    fill("post.alpha", 1, 0.3, 1.0);
    for (int j = 0; j < d.r; ++j) {
      fill("conv." + std::to_string(j) + ".weight", d.kernels[j] * d.C, 0.5);
    }
  }

  XhcParamsT<R> View() {
    XhcParamsT<R> p;
    p.router_weight = Ptr("router.weight");
    p.router_bias = Ptr("router.bias");
    p.pre_weight = Ptr("pre.weight");
    p.pre_bias = Ptr("pre.bias");
    p.pre_alpha = Ptr("pre.alpha");
    p.res_weight = Ptr("res.weight");
    p.res_bias = Ptr("res.bias");
    p.res_alpha = Ptr("res.alpha");
    p.post_weight = Ptr("post.weight");
    p.post_bias = Ptr("post.bias");
    p.post_alpha = Ptr("post.alpha");
    for (int j = 0;; ++j) {
      const R* w = Ptr("conv." + std::to_string(j) + ".weight");
      if (!w) break;
      p.conv_weight.push_back(w);
    }
    return p;
  }

  XhcGradsT<R> GradView() {
    XhcGradsT<R> g;
    g.router_weight = MutPtr("router.weight");
    g.router_bias = MutPtr("router.bias");
    g.pre_weight = MutPtr("pre.weight");
    g.pre_bias = MutPtr("pre.bias");
    g.pre_alpha = MutPtr("pre.alpha");
    g.res_weight = MutPtr("res.weight");
    g.res_bias = MutPtr("res.bias");
    g.res_alpha = MutPtr("res.alpha");
    g.post_weight = MutPtr("post.weight");
    g.post_bias = MutPtr("post.bias");
    g.post_alpha = MutPtr("post.alpha");
    for (int j = 0;; ++j) {
      R* w = MutPtr("conv." + std::to_string(j) + ".weight");
      if (!w) break;
      g.conv_weight.push_back(w);
    }
    return g;
  }

  // Same tensors cast to another scalar type.
  template <typename S>
  ParamStore<S> Cast() const {
    ParamStore<S> out;
    for (const auto& [n, v] : tensors)
      out.tensors.emplace_back(n, std::vector<S>(v.begin(), v.end()));
    return out;
  }
};

// Parameter views of the sublayers of one xhc_flash window, in order; the entry's view also
// lists every sublayer's pre.* (spec 4.5: the entry projects all the window's read maps).
template <typename R>
std::vector<XhcParamsT<R>> WindowViews(std::vector<ParamStore<R>>& params) {
  std::vector<XhcParamsT<R>> v;
  for (auto& p : params) v.push_back(p.View());
  for (auto& p : params) {
    v[0].window_pre_weight.push_back(p.Ptr("pre.weight"));
    v[0].window_pre_bias.push_back(p.Ptr("pre.bias"));
    v[0].window_pre_alpha.push_back(p.Ptr("pre.alpha"));
  }
  return v;
}

template <typename R>
std::vector<R> RandomVector(size_t n, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> nd(0.0, scale);
  std::vector<R> v(n);
  for (auto& e : v) e = R(nd(rng));
  return v;
}

// An xhc sublayer's configuration (N streams, k active, m fixed, MLP side or not).
inline XhcConfig SublayerConfig(int N, int k, int m, bool mlp, std::vector<int> kernels, bool gs,
                                int sinkhorn_iters) {
  XhcConfig c;
  c.n_streams = N, c.n_active = k, c.n_fixed = m, c.is_mlp = mlp;
  c.conv_kernels = std::move(kernels);
  c.gram_schmidt = gs;
  c.sinkhorn_iters = sinkhorn_iters;
  return c;
}

// The w sublayers of one xhc_flash window, attention and MLP sides alternating.
inline std::vector<XhcConfig> FlashWindowConfigs(int w, int N, int k, int m,
                                                 const std::vector<int>& kernels,
                                                 int sinkhorn_iters) {
  std::vector<XhcConfig> cfgs;
  for (int q = 0; q < w; ++q) {
    XhcConfig c = SublayerConfig(N, k, m, q % 2 == 1, kernels, true, sinkhorn_iters);
    c.type = ResidualType::kXhcFlash;
    c.window = w;
    c.window_pos = q;
    cfgs.push_back(c);
  }
  return cfgs;
}

}  // namespace xhc::kernels::testing

#endif  // XHC_KERNELS_CPU_XHC_XHC_TEST_UTIL_H_
