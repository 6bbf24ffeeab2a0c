#include "runtime/train/optimizer.h"

#include "kernels/cpu/nn/adamw.h"

namespace xhc::train {

double GradSumOfSquares(const model::ParamSetT<float>& params) {
  double total = 0;
  for (const auto& p : params.all()) total += nn::sum_of_squares(p->grad.data(), p->numel());
  return total;
}

StepStats ApplyAdamW(const OptimConfig& optim, int64_t total_steps, int64_t step,
                     double global_grad_norm, model::ParamSetT<float>* params) {
  StepStats stats;
  stats.grad_norm = global_grad_norm;
  stats.lr = nn::lr_at(step, optim.warmup_steps, total_steps, static_cast<float>(optim.lr),
                       static_cast<float>(optim.min_lr_ratio));
  stats.clip = optim.grad_clip > 0
                   ? nn::clip_coefficient(global_grad_norm, static_cast<float>(optim.grad_clip))
                   : 1.0;
  nn::AdamWOptions opt;
  opt.beta1 = static_cast<float>(optim.beta1);
  opt.beta2 = static_cast<float>(optim.beta2);
  opt.eps = static_cast<float>(optim.eps);
  opt.weight_decay = static_cast<float>(optim.weight_decay);
  for (const auto& p : params->all()) {
    if (p->exp_avg.size() != p->value.size()) p->exp_avg.assign(p->value.size(), 0.0f);
    if (p->exp_avg_sq.size() != p->value.size()) p->exp_avg_sq.assign(p->value.size(), 0.0f);
    nn::adamw_step(p->value.data(), p->grad.data(), p->exp_avg.data(), p->exp_avg_sq.data(),
                   p->numel(), step + 1, static_cast<float>(stats.lr), p->decay,
                   static_cast<float>(stats.clip), opt);
  }
  return stats;
}

}  // namespace xhc::train
