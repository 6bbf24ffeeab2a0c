#include "kernels/cpu/nn/cross_entropy.h"

#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

namespace xhc::nn {

absl::Status CrossEntropyForward(float* loss, float* lse, const float* logits,
                                 const int32_t* targets, int R, int V) {
  RETURN_IF_ERROR(CheckCrossEntropy("CrossEntropyForward", targets, R, V));
  if (R == 0) {
    *loss = 0.0f;
    return absl::OkStatus();
  }
#pragma omp parallel for schedule(static)
  for (int r = 0; r < R; ++r) {
    const float* x = logits + static_cast<long>(r) * V;
    float mx = x[0];
    for (int c = 1; c < V; ++c) mx = x[c] > mx ? x[c] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < V; ++c) sum += std::exp(x[c] - mx);
    lse[r] = mx + std::log(sum);
  }
  // Row order, in double: the loss is logged and compared across runs and layouts.
  double total = 0.0;
  for (int r = 0; r < R; ++r) {
    total += static_cast<double>(lse[r]) - logits[static_cast<long>(r) * V + targets[r]];
  }
  *loss = static_cast<float>(total / R);
  return absl::OkStatus();
}

absl::Status CrossEntropyBackward(float* dlogits, const float* logits, const float* lse,
                                  const int32_t* targets, int R, int V, float scale) {
  RETURN_IF_ERROR(CheckCrossEntropy("CrossEntropyBackward", targets, R, V));
  const float s = scale / R;
#pragma omp parallel for schedule(static)
  for (int r = 0; r < R; ++r) {
    const long off = static_cast<long>(r) * V;
    const float l = lse[r];
#pragma omp simd
    for (int c = 0; c < V; ++c) dlogits[off + c] = s * std::exp(logits[off + c] - l);
    dlogits[off + targets[r]] -= s;
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn
