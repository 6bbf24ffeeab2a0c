#ifndef XHC_KERNELS_CPU_XHC_FLASH_WINDOW_H_
#define XHC_KERNELS_CPU_XHC_FLASH_WINDOW_H_

// xhc_flash (model-spec.md 4.5) bookkeeping shared by the reference and the optimized path:
// sizing the window context at its entry, checking that a later sublayer was handed its
// window, and copying the window's per-token routing and read map into a sublayer's cache so
// that the rest of the sublayer runs the xhc code unchanged.

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels {

template <typename T>
absl::Status CheckWindowParams(const XhcDims& d, const XhcParamsT<T>& P) {
  if (!d.flash || d.pos != 0) return absl::OkStatus();
  const size_t w = static_cast<size_t>(d.window);
  if (P.window_pre_weight.size() != w || P.window_pre_bias.size() != w ||
      P.window_pre_alpha.size() != w) {
    return absl::InvalidArgumentError(
        absl::StrCat("xhc_flash window entry needs the pre.* parameters of all ", w, " sublayers"));
  }
  for (size_t q = 0; q < w; ++q) {
    if (!P.window_pre_weight[q] || !P.window_pre_bias[q] || !P.window_pre_alpha[q]) {
      return absl::InvalidArgumentError(absl::StrCat("window sublayer ", q, ": pre.* missing"));
    }
  }
  return absl::OkStatus();
}

// At the window entry: a fresh context for n tokens. Later sublayers: the context must be the
// entry's, for the same tokens.
template <typename T>
absl::Status PrepareWindow(const XhcDims& d, size_t n, XhcCacheT<T>* cache) {
  if (!d.flash) return absl::OkStatus();
  const size_t N = d.N, k = d.k, w = d.window, C = d.C;
  if (d.pos == 0) {
    if (!cache->window) cache->window = std::make_shared<FlashWindowT<T>>();
    FlashWindowT<T>& win = *cache->window;
    win.w = d.window;
    win.idx.resize(n * k);
    win.p.resize(n * k);
    win.s.resize(n * N);
    win.mean.resize(n);
    win.rstd_ln.resize(n);
    win.rstd.resize(n);
    win.proj.resize(n * (N + w * N));
    win.hpre.resize(n * w * N);
    win.base.resize(n * w * C);
    win.dp.assign(n * k, T(0));
    win.dz_pre.assign(n * w * N, T(0));
    win.dz_router.assign(n * N, T(0));
    win.entry_backward_done = 0;
    return absl::OkStatus();
  }
  if (!cache->window || cache->window->w != d.window || cache->window->idx.size() != n * k) {
    return absl::FailedPreconditionError(absl::StrCat(
        "xhc_flash sublayer at window position ", d.pos,
        " needs its window entry's context (XhcCache::window) for the same micro-batch"));
  }
  return absl::OkStatus();
}

// Copies token `tok`'s routing, statistics and this sublayer's read map from the window into
// the sublayer's own cache fields (idx, p, s, hpre, mean, rstd_ln, rstd, proj).
template <typename T>
void CopyFromWindow(const XhcDims& d, size_t tok, XhcCacheT<T>* cache) {
  const FlashWindowT<T>& win = *cache->window;
  const size_t N = d.N, k = d.k, w = d.window, PW = N + w * N;
  std::copy_n(win.idx.data() + tok * k, k, cache->idx.data() + tok * k);
  std::copy_n(win.p.data() + tok * k, k, cache->p.data() + tok * k);
  std::copy_n(win.s.data() + tok * N, N, cache->s.data() + tok * N);
  std::copy_n(win.hpre.data() + (tok * w + d.pos) * N, N, cache->hpre.data() + tok * N);
  cache->mean[tok] = win.mean[tok];
  cache->rstd_ln[tok] = win.rstd_ln[tok];
  cache->rstd[tok] = win.rstd[tok];
  std::copy_n(win.proj.data() + tok * PW, N, cache->proj.data() + tok * 2 * N);  // router
  std::copy_n(win.proj.data() + tok * PW + N + d.pos * N, N,
              cache->proj.data() + tok * 2 * N + N);  // this sublayer's read map
}

// The weight pass of a window's sublayer reads read-map gradients that only the entry's input
// backward completes.
template <typename T>
absl::Status CheckWindowBackwardDone(const XhcDims& d, const XhcCacheT<T>& cache) {
  if (d.flash && (!cache.window || !cache.window->entry_backward_done)) {
    return absl::FailedPreconditionError(
        "xhc_flash: a window's weight gradients need the input backward of its entry "
        "sublayer (window position 0) first");
  }
  return absl::OkStatus();
}

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_FLASH_WINDOW_H_
