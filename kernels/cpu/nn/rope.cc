#include "kernels/cpu/nn/rope.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

namespace xhc::nn {
namespace {

// cos/sin table (T, dh/2). Angles are formed in double, like the reference, so positions up
// to a few thousand keep full float accuracy in cos/sin.
void build_table(std::vector<float>& cos_t, std::vector<float>& sin_t, int T, int dh,
                 double theta) {
  const int half = dh / 2;
  cos_t.resize(static_cast<size_t>(T) * half);
  sin_t.resize(static_cast<size_t>(T) * half);
  std::vector<double> inv_freq(half);
  for (int j = 0; j < half; ++j) inv_freq[j] = std::pow(theta, -2.0 * j / dh);
  for (int t = 0; t < T; ++t) {
    for (int j = 0; j < half; ++j) {
      const double angle = t * inv_freq[j];
      cos_t[static_cast<size_t>(t) * half + j] = static_cast<float>(std::cos(angle));
      sin_t[static_cast<size_t>(t) * half + j] = static_cast<float>(std::sin(angle));
    }
  }
}

void rotate(float* out, const float* x, int B, int T, int H, int dh, float theta, float sign) {
  std::vector<float> cos_t, sin_t;
  build_table(cos_t, sin_t, T, dh, theta);
  const int half = dh / 2;
#pragma omp parallel for schedule(static)
  for (long bt = 0; bt < static_cast<long>(B) * T; ++bt) {
    const int t = static_cast<int>(bt % T);
    const float* cr = cos_t.data() + static_cast<size_t>(t) * half;
    const float* sr = sin_t.data() + static_cast<size_t>(t) * half;
    for (int h = 0; h < H; ++h) {
      const long base = (bt * H + h) * dh;
      const float* xr = x + base;
      float* orow = out + base;
#pragma omp simd
      for (int j = 0; j < half; ++j) {
        const float x1 = xr[j];
        const float x2 = xr[half + j];
        const float s = sign * sr[j];
        orow[j] = x1 * cr[j] - x2 * s;
        orow[half + j] = x1 * s + x2 * cr[j];
      }
    }
  }
}

}  // namespace

absl::Status RopeForward(float* out, const float* x, int B, int T, int H, int dh, float theta) {
  RETURN_IF_ERROR(CheckRope("RopeForward", B, T, H, dh));
  rotate(out, x, B, T, H, dh, theta, 1.0f);
  return absl::OkStatus();
}

absl::Status RopeBackward(float* dx, const float* dout, int B, int T, int H, int dh, float theta) {
  RETURN_IF_ERROR(CheckRope("RopeBackward", B, T, H, dh));
  rotate(dx, dout, B, T, H, dh, theta, -1.0f);
  return absl::OkStatus();
}

}  // namespace xhc::nn
