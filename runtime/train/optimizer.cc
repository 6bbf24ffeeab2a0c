#include "runtime/train/optimizer.h"

#include <vector>

#include "kernels/cpu/nn/adamw.h"

namespace xhc::train {

double GradSumOfSquares(const model::ParamSetT<float>& params) {
  // Piece sums in parallel, then added in order exactly as nn::SumOfSquares adds its blocks
  // (a piece is one of its blocks) and tensor totals in canonical order.
  const auto& pieces = params.pieces();
  const int64_t count = static_cast<int64_t>(pieces.size());
  std::vector<double> piece_sum(pieces.size());
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) {
    piece_sum[k] = nn::SumOfSquaresBlock(pieces[k].param->grad.data() + pieces[k].begin,
                                         pieces[k].end - pieces[k].begin);
  }
  double total = 0, tensor_total = 0;
  for (int64_t k = 0; k < count; ++k) {
    if (pieces[k].begin == 0) {
      total += tensor_total;
      tensor_total = 0;
    }
    tensor_total += piece_sum[k];
  }
  return total + tensor_total;
}

StepStats ApplyAdamW(const OptimConfig& optim, int64_t total_steps, int64_t step,
                     double global_grad_norm, model::ParamSetT<float>* params) {
  StepStats stats;
  stats.grad_norm = global_grad_norm;
  stats.lr = nn::LrAt(step, optim.warmup_steps, total_steps, static_cast<float>(optim.lr),
                      static_cast<float>(optim.min_lr_ratio));
  stats.clip = optim.grad_clip > 0
                   ? nn::ClipCoefficient(global_grad_norm, static_cast<float>(optim.grad_clip))
                   : 1.0;
  nn::AdamWOptions opt;
  opt.beta1 = static_cast<float>(optim.beta1);
  opt.beta2 = static_cast<float>(optim.beta2);
  opt.eps = static_cast<float>(optim.eps);
  opt.weight_decay = static_cast<float>(optim.weight_decay);
  for (const auto& p : params->all()) {
    if (p->exp_avg.size() != p->value.size()) p->exp_avg.assign(p->value.size(), 0.0f);
    if (p->exp_avg_sq.size() != p->value.size()) p->exp_avg_sq.assign(p->value.size(), 0.0f);
  }
  const auto& pieces = params->pieces();
  const int64_t count = static_cast<int64_t>(pieces.size());
  const float lr = static_cast<float>(stats.lr), clip = static_cast<float>(stats.clip);
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < count; ++k) {
    model::ParamT<float>* p = pieces[k].param;
    const int64_t b = pieces[k].begin;
    nn::AdamwStepOneThread(p->value.data() + b, p->grad.data() + b, p->exp_avg.data() + b,
                           p->exp_avg_sq.data() + b, pieces[k].end - b, step + 1, lr, p->decay,
                           clip, opt);
  }
  return stats;
}

}  // namespace xhc::train
