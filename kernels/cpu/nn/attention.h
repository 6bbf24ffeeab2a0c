#ifndef XHC_KERNELS_CPU_NN_ATTENTION_H_
#define XHC_KERNELS_CPU_NN_ATTENTION_H_

// Causal softmax attention with grouped-query heads (model-spec §3): query head h reads kv
// head h / (H/Hkv), scores scaled by 1/sqrt(dh), token i attends to tokens 0..i of its own
// sequence. The forward saves only the per-row log-sum-exp; the backward recomputes the
// probabilities from it (flash-attention style), so memory is O(B·H·T), not O(B·H·T²).
//
// All buffers caller-allocated, row-major, no aliasing; H must be a multiple of Hkv.
// Forward is parallel over (b, h); backward over (b, kv head), each task summing its query
// heads and query blocks in a fixed order. Inside a task, 64-row query blocks multiply
// against their causal key prefix with single-threaded sgemm calls of fixed shapes, so
// results are bit-identical for any thread count (OpenBLAS is pinned to one thread).

#include "absl/status/status.h"

namespace xhc::nn {

// q is (B,T,H,dh), k and v are (B,T,Hkv,dh) -> out is (B,T,H,dh);
// lse is (B,H,T), saved for backward.
absl::Status AttentionForward(float* out, float* lse, const float* q, const float* k,
                              const float* v, int B, int T, int H, int Hkv, int dh);

// dout is (B,T,H,dh); q, k, v, out, lse as saved by forward ->
// dq (B,T,H,dh), dk and dv (B,T,Hkv,dh), all overwritten.
absl::Status AttentionBackward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                               const float* k, const float* v, const float* out, const float* lse,
                               int B, int T, int H, int Hkv, int dh);

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_ATTENTION_H_
