#ifndef XHC_RUNTIME_COMMON_ETA_H_
#define XHC_RUNTIME_COMMON_ETA_H_

// The ETA in progress lines. An evaluation step costs more than a training step, so the
// last step's time times the steps left jumps at every evaluation (12 -> 22 min at step 50
// on the quickstart); instead: the mean time of the training-only steps times the steps left,
// plus the evaluations still to come times the mean extra time an evaluation step took. The
// first training step is left out of the mean once there is a second: it pays the warm-up
// (buffers allocated and faulted in; 0.45 s against 0.25 on the quickstart), which kept the
// early lines' ETA high (2m20s after step 2 of the quickstart, for about 1m35s left).

#include <cstdint>
#include <string>

namespace xhc {

class EtaEstimator {
 public:
  // Steps are 1-based counts `done`; an evaluation happens when done % eval_every == 0 and
  // at the last step (eval_every 0: never).
  EtaEstimator(int64_t total_steps, int eval_every)
      : total_(total_steps), eval_every_(eval_every) {}

  // Step `done` took `step_s` seconds, evaluation included when `evaluated`.
  void Add(int64_t done, double step_s, bool evaluated);

  // Seconds left after step `done`.
  double SecondsLeft(int64_t done) const;

 private:
  int64_t EvaluationsAfter(int64_t done) const;

  // Mean time of a training-only step: of those after the first, once there are any.
  double TrainMean() const;

  int64_t total_;
  int eval_every_;
  double first_train_s_ = 0, train_s_ = 0, eval_extra_s_ = 0;
  int64_t train_steps_ = 0, evals_ = 0;
};

// "12m05s", "1h02m".
std::string FormatEta(double seconds);

}  // namespace xhc

#endif  // XHC_RUNTIME_COMMON_ETA_H_
