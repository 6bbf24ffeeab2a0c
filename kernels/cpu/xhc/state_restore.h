#ifndef XHC_KERNELS_CPU_XHC_STATE_RESTORE_H_
#define XHC_KERNELS_CPU_XHC_STATE_RESTORE_H_

// Rebuilding a sublayer's input state from its output, so a stage keeps ONE copy of the
// residual state per micro-batch instead of one per sublayer. A sublayer writes only the
// streams of its active set (all N for mhc and hc) and its cache keeps their old values (xa,
// (n, k, C), slot order), so X_in = X_out with X_out[idx_j] <- xa[j]: an exact copy, bit for
// bit. Under xhc_flash the window entry's cache does this for the whole window: its xa is
// X0[idx] and only those streams change inside the window.

#include <cstring>

#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels {

// X (B*T, N, C): in, the state after the sublayer that filled `cache`; out, its input.
template <typename T>
void RestoreInput(const XhcCacheT<T>& cache, T* X) {
  const XhcDims& d = cache.dims;
  const size_t n = static_cast<size_t>(cache.B) * cache.T_len, k = d.k, C = d.C, D = d.D();
  // Over threads: serial, this was ~2.6 ms per sublayer at model_bench's shape (8 MiB of
  // scattered rows), run by both the input and the weight pass: ~2% of an xhc step (PERF.md 23).
#pragma omp parallel for schedule(static)
  for (size_t tok = 0; tok < n; ++tok) {
    for (size_t j = 0; j < k; ++j) {
      std::memcpy(X + tok * D + cache.idx[tok * k + j] * C, cache.xa.data() + (tok * k + j) * C,
                  sizeof(T) * C);
    }
  }
}

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_STATE_RESTORE_H_
