#include "runtime/common/eta.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace xhc {

void EtaEstimator::Add(int64_t done, double step_s, bool evaluated) {
  (void)done;
  if (!evaluated) {
    if (train_steps_ == 0) first_train_s_ = step_s;
    train_s_ += step_s;
    ++train_steps_;
    return;
  }
  // An evaluation step's extra time over a training step (before any training-only step
  // there is nothing to tell them apart by: the whole step counts as evaluation).
  eval_extra_s_ += std::max(0.0, step_s - TrainMean());
  ++evals_;
}

double EtaEstimator::TrainMean() const {
  if (train_steps_ >= 2) return (train_s_ - first_train_s_) / static_cast<double>(train_steps_ - 1);
  return train_steps_ > 0 ? train_s_ : 0.0;
}

int64_t EtaEstimator::EvaluationsAfter(int64_t done) const {
  if (eval_every_ <= 0 || done >= total_) return 0;
  int64_t n = total_ / eval_every_ - done / eval_every_;
  if (total_ % eval_every_ != 0) ++n;  // the final step evaluates too
  return n;
}

double EtaEstimator::SecondsLeft(int64_t done) const {
  const double eval_mean = evals_ > 0 ? eval_extra_s_ / evals_ : 0.0;
  return TrainMean() * static_cast<double>(std::max<int64_t>(0, total_ - done)) +
         eval_mean * static_cast<double>(EvaluationsAfter(done));
}

std::string FormatEta(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dm%02ds", s / 60, s % 60);
}

}  // namespace xhc
