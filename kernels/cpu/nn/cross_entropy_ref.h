#ifndef XHC_KERNELS_CPU_NN_CROSS_ENTROPY_REF_H_
#define XHC_KERNELS_CPU_NN_CROSS_ENTROPY_REF_H_

#include <cmath>
#include <cstdint>

// Naive reference for loss = mean over rows of −log softmax(logits)[target] (model-spec §2).

namespace xhc::nn::ref {

// logits is (R,V), targets is (R) with values in [0,V); lse is (R), saved for backward.
// Returns the mean loss.
template <typename T>
T cross_entropy_forward(T* lse, const T* logits, const int32_t* targets, int R, int V) {
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
  return total / R;
}

// dlogits (R,V), overwritten: scale · ∂(mean loss)/∂logits = scale · (softmax − onehot) / R.
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                            int R, int V, T scale) {
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < V; ++c) {
      const long n = static_cast<long>(r) * V + c;
      const T p = std::exp(logits[n] - lse[r]);
      dlogits[n] = scale * (p - (c == targets[r] ? T(1) : T(0))) / R;
    }
  }
}

}  // namespace xhc::nn::ref

#endif  // XHC_KERNELS_CPU_NN_CROSS_ENTROPY_REF_H_
