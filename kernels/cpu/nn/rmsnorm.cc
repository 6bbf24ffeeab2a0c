#include "kernels/cpu/nn/rmsnorm.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

namespace xhc::nn {

absl::Status RmsnormForward(float* y, float* rstd, const float* x, const float* w, int R, int C,
                            float eps) {
  RETURN_IF_ERROR(CheckDims("RmsnormForward", {{"R", R}, {"C", C}}));
#pragma omp parallel for schedule(static)
  for (int r = 0; r < R; ++r) {
    const float* xr = x + static_cast<long>(r) * C;
    float* yr = y + static_cast<long>(r) * C;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int c = 0; c < C; ++c) ss += xr[c] * xr[c];
    const float s = 1.0f / std::sqrt(ss / C + eps);
    rstd[r] = s;
#pragma omp simd
    for (int c = 0; c < C; ++c) yr[c] = xr[c] * s * w[c];
  }
  return absl::OkStatus();
}

absl::Status RmsnormBackwardInput(float* dx, const float* dy, const float* x, const float* w,
                                  const float* rstd, int R, int C) {
  RETURN_IF_ERROR(CheckDims("RmsnormBackwardInput", {{"R", R}, {"C", C}}));
#pragma omp parallel for schedule(static)
  for (int r = 0; r < R; ++r) {
    const long off = static_cast<long>(r) * C;
    const float s = rstd[r];
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int c = 0; c < C; ++c) dot += w[c] * dy[off + c] * x[off + c];
    const float mean = dot * s / C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      dx[off + c] = s * (w[c] * dy[off + c] - x[off + c] * s * mean);
    }
  }
  return absl::OkStatus();
}

absl::Status RmsnormBackwardWeight(float* dw, const float* dy, const float* x, const float* rstd,
                                   int R, int C) {
  RETURN_IF_ERROR(CheckDims("RmsnormBackwardWeight", {{"R", R}, {"C", C}}));
  // Split channels (not rows) across threads: each dw[c] then sums its rows in row order
  // on one thread, which keeps the result independent of the thread count without a
  // second reduction pass.
  constexpr int kChunk = 64;
  const int num_chunks = (C + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int chunk = 0; chunk < num_chunks; ++chunk) {
    const int c0 = chunk * kChunk;
    const int c1 = std::min(C, c0 + kChunk);
    float acc[kChunk] = {};
    for (int r = 0; r < R; ++r) {
      const long off = static_cast<long>(r) * C;
      const float s = rstd[r];
#pragma omp simd
      for (int c = c0; c < c1; ++c) acc[c - c0] += dy[off + c] * x[off + c] * s;
    }
    for (int c = c0; c < c1; ++c) dw[c] += acc[c - c0];
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn
