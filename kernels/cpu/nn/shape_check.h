#ifndef XHC_KERNELS_CPU_NN_SHAPE_CHECK_H_
#define XHC_KERNELS_CPU_NN_SHAPE_CHECK_H_

// The checks every transformer op, optimized and reference alike, runs before it touches a
// buffer: a shape the op cannot run is kInvalidArgument naming the op and the argument
// ("MatmulForward: K = -3, must be >= 0"), never a wild read or write. Zero sizes are valid
// and do nothing.

#include <cstdint>
#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace xhc::nn {

struct Dim {
  const char* name;
  long value;
};

// Every size >= 0.
inline absl::Status CheckDims(const char* op, std::initializer_list<Dim> dims) {
  for (const Dim& d : dims) {
    if (d.value < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": ", d.name, " = ", d.value, ", must be >= 0"));
    }
  }
  return absl::OkStatus();
}

// RoPE rotates pairs (j, j + dh/2): the head dimension must be even.
inline absl::Status CheckRope(const char* op, int B, int T, int H, int dh) {
  if (absl::Status s = CheckDims(op, {{"B", B}, {"T", T}, {"H", H}, {"dh", dh}}); !s.ok()) {
    return s;
  }
  if (dh % 2 != 0) return absl::InvalidArgumentError(absl::StrCat(op, ": dh = ", dh, " is odd"));
  return absl::OkStatus();
}

// Grouped-query heads: every kv head serves H / Hkv query heads.
inline absl::Status CheckAttention(const char* op, int B, int T, int H, int Hkv, int dh) {
  if (absl::Status s = CheckDims(op, {{"B", B}, {"T", T}, {"H", H}, {"Hkv", Hkv}, {"dh", dh}});
      !s.ok()) {
    return s;
  }
  if (H > 0 && (Hkv < 1 || H % Hkv != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": H = ", H, " is not a multiple of Hkv = ", Hkv));
  }
  return absl::OkStatus();
}

// Rows of V logits, each target in [0, V).
inline absl::Status CheckCrossEntropy(const char* op, const int32_t* targets, int R, int V) {
  if (absl::Status s = CheckDims(op, {{"R", R}, {"V", V}}); !s.ok()) return s;
  for (int r = 0; r < R; ++r) {
    if (targets[r] < 0 || targets[r] >= V) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": target ", targets[r], " of row ", r, " is outside [0, ", V, ")"));
    }
  }
  return absl::OkStatus();
}

// An AdamW step: n >= 0 elements, step >= 1 (bias correction divides by 1 - beta^step).
inline absl::Status CheckAdamw(const char* op, int64_t n, int64_t step) {
  if (absl::Status s = CheckDims(op, {{"n", static_cast<long>(n)}}); !s.ok()) return s;
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": step = ", step, ", must be >= 1"));
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_SHAPE_CHECK_H_
