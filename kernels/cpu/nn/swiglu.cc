#include "kernels/cpu/nn/swiglu.h"

#include <cmath>

namespace xhc::nn {

void swiglu_forward(float* h, const float* a, const float* b, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + std::exp(-a[i]));
    h[i] = a[i] * sig * b[i];
  }
}

void swiglu_backward(float* da, float* db, const float* dh, const float* a, const float* b,
                     long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float sig = 1.0f / (1.0f + std::exp(-a[i]));
    da[i] = dh[i] * b[i] * sig * (1.0f + a[i] * (1.0f - sig));
    db[i] = dh[i] * a[i] * sig;
  }
}

}  // namespace xhc::nn
