#ifndef XHC_KERNELS_CPU_XHC_STATE_RESTORE_H_
#define XHC_KERNELS_CPU_XHC_STATE_RESTORE_H_

// Rebuilding a sublayer's input state from its output, so a stage keeps ONE copy of the
// residual state per micro-batch instead of one per sublayer. A sublayer writes only the
// streams of its active set (all N for mhc and hc) and its cache keeps their old values (xa,
// (n, k, C), slot order), so X_in = X_out with X_out[idx_j] <- xa[j]: an exact copy, bit for
// bit. Under xhc_flash the window entry's cache does this for the whole window: its xa is
// X0[idx] and only those streams change inside the window.

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels {

// One row of n floats to dst with non-temporal stores (SSE, the build's baseline); dst and
// n * 4 bytes multiples of 16. RestoreInput writes whole lines it never reads: a normal store
// first reads each line from memory (read for ownership).
inline void StreamRow(const float* src, float* dst, size_t n) {
  size_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m128 a = _mm_loadu_ps(src + c), b = _mm_loadu_ps(src + c + 4);
    const __m128 e = _mm_loadu_ps(src + c + 8), f = _mm_loadu_ps(src + c + 12);
    _mm_stream_ps(dst + c, a), _mm_stream_ps(dst + c + 4, b);
    _mm_stream_ps(dst + c + 8, e), _mm_stream_ps(dst + c + 12, f);
  }
  for (; c < n; c += 4) _mm_stream_ps(dst + c, _mm_loadu_ps(src + c));
}

// One token of RestoreInput: xt (N, C), the token's state after the sublayer; out, its input.
// stream: the rows written with non-temporal stores (float rows, C % 4 == 0, xt 16-aligned).
template <typename T>
inline void RestoreToken(const XhcCacheT<T>& cache, size_t tok, T* xt, bool stream = false) {
  const size_t k = cache.dims.k, C = cache.dims.C;
  for (size_t j = 0; j < k; ++j) {
    const T* src = cache.xa.data() + (tok * k + j) * C;
    T* dst = xt + cache.idx[tok * k + j] * C;
    if constexpr (std::is_same_v<T, float>) {
      if (stream) {
        StreamRow(src, dst, C);
        continue;
      }
    }
    std::memcpy(dst, src, sizeof(T) * C);
  }
}

// States at least this large are restored with non-temporal stores. Above any L3 of the
// machines measured here (32 MiB a CCD on the EPYCs), the weight pass that reads the state next
// takes it from memory either way, and streaming saves the reads for ownership (xhc_bench,
// 256 MiB state: restore 8.6-9.9 -> 4.5-6.8 ms); at model_bench's 32 MiB the restored rows
// were still in cache for it and streaming them out cost more than it saved
// (docs/design/state-buffers-and-memory.md).
constexpr size_t kStreamRestoreBytes = size_t{128} << 20;

// X (B*T, N, C): in, the state after the sublayer that filled `cache`; out, its input.
// stream_from_bytes: the state size from which rows are streamed (tests pass 0).
template <typename T>
void RestoreInput(const XhcCacheT<T>& cache, T* X, size_t stream_from_bytes = kStreamRestoreBytes) {
  const size_t n = static_cast<size_t>(cache.B) * cache.T_len, D = cache.dims.D();
  const size_t C = cache.dims.C;
  const bool stream = std::is_same_v<T, float> && C % 4 == 0 &&
                      reinterpret_cast<uintptr_t>(X) % 16 == 0 &&
                      n * D * sizeof(T) >= stream_from_bytes;
  // Over threads: serial, this takes ~2.6 ms per sublayer at model_bench's shape (8 MiB of
  // scattered rows), run by both the input and the weight pass: ~2% of an xhc step
  // (docs/design/state-buffers-and-memory.md).
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (size_t tok = 0; tok < n; ++tok) RestoreToken(cache, tok, X + tok * D, stream);
    if (stream) _mm_sfence();  // the streamed rows visible before the barrier
  }
}

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_STATE_RESTORE_H_
