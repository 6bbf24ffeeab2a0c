#include "kernels/cpu/nn/adamw.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "absl/status/status.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/shape_check.h"

namespace xhc::nn {

namespace {

struct AdamWCoefficients {
  float bc1, bc2, b1, b2, eps, decay_factor;
};

AdamWCoefficients Coefficients(int64_t step, float lr, bool decay, const AdamWOptions& opt) {
  // Bias corrections in double: beta2^step loses most of its digits in float by step ~1e4.
  return {static_cast<float>(1.0 - std::pow(double{opt.beta1}, double(step))),
          static_cast<float>(1.0 - std::pow(double{opt.beta2}, double(step))),
          opt.beta1,
          opt.beta2,
          opt.eps,
          decay ? lr * opt.weight_decay : 0.0f};
}

// Element i's update; elementwise, so where the range is split cannot change a bit.
inline void UpdateOne(const AdamWCoefficients& k, float lr, float grad_scale, float* param,
                      const float* grad, float* m, float* v, int64_t i) {
  const float g = grad[i] * grad_scale;
  const float p = param[i] - k.decay_factor * param[i];
  const float mi = k.b1 * m[i] + (1.0f - k.b1) * g;
  const float vi = k.b2 * v[i] + (1.0f - k.b2) * g * g;
  m[i] = mi;
  v[i] = vi;
  param[i] = p - lr * (mi / k.bc1) / (std::sqrt(vi / k.bc2) + k.eps);
}

}  // namespace

absl::Status AdamwStep(float* param, const float* grad, float* m, float* v, int64_t n, int64_t step,
                       float lr, bool decay, float grad_scale, const AdamWOptions& opt) {
  RETURN_IF_ERROR(CheckAdamw("AdamwStep", n, step));
  const AdamWCoefficients k = Coefficients(step, lr, decay, opt);
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) UpdateOne(k, lr, grad_scale, param, grad, m, v, i);
  return absl::OkStatus();
}

void AdamwStepOneThread(float* param, const float* grad, float* m, float* v, int64_t n,
                        int64_t step, float lr, bool decay, float grad_scale,
                        const AdamWOptions& opt) {
  const AdamWCoefficients k = Coefficients(step, lr, decay, opt);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) UpdateOne(k, lr, grad_scale, param, grad, m, v, i);
}

float LrAt(int64_t step, int64_t warmup_steps, int64_t total_steps, float peak_lr,
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

double SumOfSquaresBlock(const float* g, int64_t n) {
  // Eight running sums (element i goes to sum i % 8), added in lane order at the end: a fixed
  // order, so the same bits on any machine and thread count, and eight independent chains
  // instead of one (a single double chain ran at one element per add latency).
  constexpr int kLanes = 8;
  double lane[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] += double{g[i + j]} * g[i + j];
  }
  for (int j = 0; i < n; ++i, ++j) lane[j] += double{g[i]} * g[i];
  double acc = 0.0;
  for (double x : lane) acc += x;
  return acc;
}

double SumOfSquares(const float* g, int64_t n) {
  // The block size is a constant, not derived from the thread count, so the partial sums and
  // their order are the same however many threads run.
  constexpr int64_t kBlock = kSumOfSquaresBlock;
  const int64_t num_blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(num_blocks);
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < num_blocks; ++blk) {
    const int64_t begin = blk * kBlock;
    partial[blk] = SumOfSquaresBlock(g + begin, std::min(n, begin + kBlock) - begin);
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

double GlobalGradNorm(std::span<const std::span<const float>> grads) {
  double total = 0.0;
  for (auto g : grads) total += SumOfSquares(g.data(), static_cast<int64_t>(g.size()));
  return std::sqrt(total);
}

float ClipCoefficient(double norm, float max_norm) {
  return static_cast<float>(std::min(1.0, max_norm / (norm + 1e-6)));
}

}  // namespace xhc::nn
