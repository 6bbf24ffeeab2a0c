#include "kernels/cpu/nn/swiglu.h"

#include <cmath>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

namespace xhc::nn {

absl::Status SwigluForward(float* h, const float* a, const float* b, long n) {
  RETURN_IF_ERROR(CheckDims("SwigluForward", {{"n", n}}));
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + std::exp(-a[i]));
    h[i] = a[i] * sig * b[i];
  }
  return absl::OkStatus();
}

absl::Status SwigluBackward(float* da, float* db, const float* dh, const float* a, const float* b,
                            long n) {
  RETURN_IF_ERROR(CheckDims("SwigluBackward", {{"n", n}}));
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + std::exp(-a[i]));
    da[i] = dh[i] * b[i] * sig * (1.0f + a[i] * (1.0f - sig));
    db[i] = dh[i] * a[i] * sig;
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn
