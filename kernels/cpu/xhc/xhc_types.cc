#include "kernels/cpu/xhc/xhc_types.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace xhc::kernels {

absl::StatusOr<XhcDims> ResolveDims(const XhcConfig& cfg, int C) {
  XhcDims d;
  d.C = C;
  d.N = cfg.n_streams;
  if (C <= 0) return absl::InvalidArgumentError(absl::StrCat("model.d_model must be > 0, got ", C));
  if (d.N < 1 || d.N > 256) {
    return absl::InvalidArgumentError("residual.n_streams must be in [1, 256]");
  }
  if (cfg.sinkhorn_iters < 0)
    return absl::InvalidArgumentError("residual.sinkhorn_iters must be >= 0");
  if (cfg.type == ResidualType::kHc) {  // spec 4.4: N streams, all written, one component
    d.k = d.N;
    d.m = d.N;
    d.hc = true;
    if (!cfg.conv_kernels.empty() && cfg.is_mlp) {
      return absl::InvalidArgumentError("residual.conv_kernels: hc has no convolutions");
    }
    return d;
  }
  if (cfg.type == ResidualType::kMhc) {
    d.k = d.N;
    d.m = d.N;
    d.has_router = false;
    if (d.N > 16) return absl::InvalidArgumentError("residual.n_streams must be <= 16 for mhc");
  } else {
    if (d.N < 2) return absl::InvalidArgumentError("residual.n_streams must be >= 2 for xhc");
    d.k = cfg.n_active;
    d.m = cfg.n_fixed;
    if (d.k < 1 || d.k > d.N || d.k > kMaxActive) {
      return absl::InvalidArgumentError(absl::StrCat(
          "residual.n_active must be in [1, min(n_streams, ", kMaxActive, ")], got ", d.k));
    }
    if (d.m < 0 || d.m > d.k) {
      return absl::InvalidArgumentError(
          absl::StrCat("residual.n_fixed must be in [0, n_active], got ", d.m));
    }
    d.has_router = true;
  }
  if (cfg.type == ResidualType::kXhcFlash) {
    if (cfg.window != 2 && cfg.window != 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("residual.window must be 2 or 4, got ", cfg.window));
    }
    if (cfg.window_pos < 0 || cfg.window_pos >= cfg.window) {
      return absl::InvalidArgumentError(
          absl::StrCat("window position ", cfg.window_pos, " outside a window of ", cfg.window));
    }
    // Sublayers alternate attention / MLP and windows start at an attention sublayer.
    if (cfg.is_mlp != (cfg.window_pos % 2 == 1)) {
      return absl::InvalidArgumentError("xhc_flash: window positions alternate attention, mlp");
    }
    d.flash = true;
    d.window = cfg.window;
    d.pos = cfg.window_pos;
    d.has_router = d.pos == 0;
    d.has_mix = d.pos == d.window - 1;
  }
  if (cfg.is_mlp) {
    for (int w : cfg.conv_kernels) {
      if (w < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("residual.conv_kernels entries must be >= 1, got ", w));
      }
    }
    if (cfg.conv_kernels.size() > static_cast<size_t>(kMaxConvKernels)) {
      return absl::InvalidArgumentError(
          absl::StrCat("residual.conv_kernels: at most ", kMaxConvKernels, " kernels"));
    }
    d.kernels = cfg.conv_kernels;
    d.r = static_cast<int>(d.kernels.size());
    d.K = 1 + d.r;
  }
  return d;
}

}  // namespace xhc::kernels
