#ifndef XHC_KERNELS_CPU_XHC_XHC_CHECK_H_
#define XHC_KERNELS_CPU_XHC_XHC_CHECK_H_

// Argument validation shared by the reference and optimized entry points, and the one place
// that sizes a cache.

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels {

template <typename T>
absl::Status CheckParams(const XhcDims& d, const XhcParamsT<T>& p) {
  if (d.has_router && (p.router_weight == nullptr || p.router_bias == nullptr)) {
    return absl::InvalidArgumentError("router.weight / router.bias missing for xhc");
  }
  if (!p.pre_weight || !p.pre_bias || !p.pre_alpha || !p.post_weight || !p.post_bias ||
      !p.post_alpha) {
    return absl::InvalidArgumentError("pre.* and post.* parameters are required");
  }
  if (d.has_mix && (!p.res_weight || !p.res_bias || !p.res_alpha)) {
    return absl::InvalidArgumentError("res.* parameters are required");
  }
  if (static_cast<int>(p.conv_weight.size()) < d.r) {
    return absl::InvalidArgumentError(
        absl::StrCat("conv weights: expected ", d.r, ", got ", p.conv_weight.size()));
  }
  for (int j = 0; j < d.r; ++j) {
    if (p.conv_weight[j] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("conv.", j, ".weight missing"));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CheckGrads(const XhcDims& d, const XhcGradsT<T>& g) {
  if (d.has_router && (g.router_weight == nullptr || g.router_bias == nullptr)) {
    return absl::InvalidArgumentError("router gradients missing for xhc");
  }
  if (!g.pre_weight || !g.pre_bias || !g.pre_alpha || !g.post_weight || !g.post_bias ||
      !g.post_alpha) {
    return absl::InvalidArgumentError("pre.* and post.* gradients are required");
  }
  if (d.has_mix && (!g.res_weight || !g.res_bias || !g.res_alpha)) {
    return absl::InvalidArgumentError("res.* gradients are required");
  }
  if (static_cast<int>(g.conv_weight.size()) < d.r) {
    return absl::InvalidArgumentError("conv weight gradients missing");
  }
  for (int j = 0; j < d.r; ++j) {
    if (g.conv_weight[j] == nullptr) return absl::InvalidArgumentError("conv gradient missing");
  }
  return absl::OkStatus();
}

// Sizes every per-token buffer of `cache` for B x T tokens (no-op when already sized).
template <typename T>
void ResizeCache(const XhcDims& d, int B, int T_len, XhcCacheT<T>* c) {
  const size_t n = static_cast<size_t>(B) * T_len;
  c->B = B;
  c->T_len = T_len;
  c->dims = d;
  c->idx.resize(n * d.k);
  c->p.resize(n * d.k);
  c->s.resize(n * d.N);
  c->hpre.resize(n * d.N);
  c->proj.resize(n * 2 * d.N);
  c->mean.resize(n);
  c->rstd_ln.resize(n);
  c->rstd.resize(n);
  c->xa.resize(n * d.Da());
  c->rstd_a.resize(n);
  c->map_raw.resize(n * d.Q());
  c->hres.resize(n * d.k * d.k);
  c->hpost.resize(n * d.k * d.K);
  c->aug.resize(n * d.K * d.C);
  c->dz_proj.resize(n * 2 * d.N);
  c->dz_map.resize(n * d.Q());
  c->dg.resize(n * d.r * d.C);
}

// Checks that a cache was filled by XhcPre (and, when `need_aug`, XhcPost) for this config.
template <typename T>
absl::Status CheckCache(const XhcDims& d, const XhcCacheT<T>& c) {
  if (c.B <= 0 || c.T_len <= 0 || c.dims.N != d.N || c.dims.k != d.k || c.dims.K != d.K ||
      c.dims.C != d.C || c.idx.size() != static_cast<size_t>(c.B) * c.T_len * d.k) {
    return absl::InvalidArgumentError("cache was not produced by XhcPre with this config");
  }
  return absl::OkStatus();
}

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_XHC_CHECK_H_
