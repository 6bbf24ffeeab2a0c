#include "kernels/cpu/nn/adamw.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace xhc::nn {

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                float lr, bool decay, float grad_scale, const AdamWOptions& opt) {
  // Bias corrections in double: beta2^step loses most of its digits in float by step ~1e4.
  const float bc1 = static_cast<float>(1.0 - std::pow(double{opt.beta1}, double(step)));
  const float bc2 = static_cast<float>(1.0 - std::pow(double{opt.beta2}, double(step)));
  const float b1 = opt.beta1, b2 = opt.beta2, eps = opt.eps;
  const float decay_factor = decay ? lr * opt.weight_decay : 0.0f;
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    const float p = param[i] - decay_factor * param[i];
    const float mi = b1 * m[i] + (1.0f - b1) * g;
    const float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = p - lr * (mi / bc1) / (std::sqrt(vi / bc2) + eps);
  }
}

float lr_at(int64_t step, int64_t warmup_steps, int64_t total_steps, float peak_lr,
            float min_ratio) {
  if (step < warmup_steps) {
    return peak_lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  }
  const double min_lr = double{min_ratio} * peak_lr;
  if (step >= total_steps || total_steps <= warmup_steps) return static_cast<float>(min_lr);
  const double ratio = double(step - warmup_steps) / double(total_steps - warmup_steps);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return static_cast<float>(min_lr + coeff * (peak_lr - min_lr));
}

double sum_of_squares(const float* g, int64_t n) {
  // The block size is a constant, not derived from the thread count, so the partial sums and
  // their order are the same however many threads run.
  constexpr int64_t kBlock = 8192;
  const int64_t num_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(num_blocks);
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < num_blocks; ++blk) {
    const int64_t end = std::min(n, (blk + 1) * kBlock);
    double acc = 0.0;
    for (int64_t i = blk * kBlock; i < end; ++i) acc += double{g[i]} * g[i];
    partial[blk] = acc;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

double global_grad_norm(std::span<const std::span<const float>> grads) {
  double total = 0.0;
  for (auto g : grads) total += sum_of_squares(g.data(), static_cast<int64_t>(g.size()));
  return std::sqrt(total);
}

float clip_coefficient(double norm, float max_norm) {
  return static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
}

}  // namespace xhc::nn
