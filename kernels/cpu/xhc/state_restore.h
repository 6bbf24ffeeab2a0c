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

// One token of RestoreInput: xt (N, C), the token's state after the sublayer; out, its input.
template <typename T>
inline void RestoreToken(const XhcCacheT<T>& cache, size_t tok, T* xt) {
  const size_t k = cache.dims.k, C = cache.dims.C;
  for (size_t j = 0; j < k; ++j) {
    std::memcpy(xt + cache.idx[tok * k + j] * C, cache.xa.data() + (tok * k + j) * C,
                sizeof(T) * C);
  }
}

// X (B*T, N, C): in, the state after the sublayer that filled `cache`; out, its input.
template <typename T>
void RestoreInput(const XhcCacheT<T>& cache, T* X) {
  const size_t n = static_cast<size_t>(cache.B) * cache.T_len, D = cache.dims.D();
  // Over threads: serial, this was ~2.6 ms per sublayer at model_bench's shape (8 MiB of
  // scattered rows), run by both the input and the weight pass: ~2% of an xhc step (PERF.md 23).
#pragma omp parallel for schedule(static)
  for (size_t tok = 0; tok < n; ++tok) RestoreToken(cache, tok, X + tok * D);
}

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_STATE_RESTORE_H_
