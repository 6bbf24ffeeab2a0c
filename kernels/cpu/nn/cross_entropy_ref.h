#ifndef XHC_KERNELS_CPU_NN_CROSS_ENTROPY_REF_H_
#define XHC_KERNELS_CPU_NN_CROSS_ENTROPY_REF_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

// Naive reference for loss = mean over rows of −log softmax(logits)[target] (model-spec §2).

namespace xhc::nn::ref {

// logits is (R,V), targets is (R) with values in [0,V); lse is (R), saved for backward.
// *loss is the mean loss.
template <typename T>
absl::Status CrossEntropyForward(T* loss, T* lse, const T* logits, const int32_t* targets, int R,
                                 int V) {
  RETURN_IF_ERROR(CheckCrossEntropy("CrossEntropyForward", targets, R, V));
  T total = 0;
  for (int r = 0; r < R; ++r) {
    const T* x = logits + static_cast<long>(r) * V;
    T mx = x[0];
    for (int c = 1; c < V; ++c) mx = x[c] > mx ? x[c] : mx;
    T sum = 0;
    for (int c = 0; c < V; ++c) sum += std::exp(x[c] - mx);
    lse[r] = mx + std::log(sum);
    total += lse[r] - x[targets[r]];
  }
  *loss = total / R;
  return absl::OkStatus();
}

// dlogits (R,V), overwritten: scale · ∂(mean loss)/∂logits = scale · (softmax − onehot) / R.
template <typename T>
absl::Status CrossEntropyBackward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                                  int R, int V, T scale) {
  RETURN_IF_ERROR(CheckCrossEntropy("CrossEntropyBackward", targets, R, V));
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < V; ++c) {
      const long n = static_cast<long>(r) * V + c;
      const T p = std::exp(logits[n] - lse[r]);
      dlogits[n] = scale * (p - (c == targets[r] ? T(1) : T(0))) / R;
    }
  }
  return absl::OkStatus();
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_CROSS_ENTROPY_REF_H_
