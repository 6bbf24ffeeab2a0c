#ifndef XHC_RUNTIME_MODEL_PHASE_TIMES_H_
#define XHC_RUNTIME_MODEL_PHASE_TIMES_H_

// Optional wall-time accounting of a stage's work by kind, for finding where a residual
// variant's step time goes (model_bench --phases). Off unless a PhaseTimes is attached to
// the stage (StageModelT::set_phase_times): then each timed call costs two clock reads.

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace xhc::model {

struct PhaseTimes {
  enum Phase {
    kEmbed,          // embedding, expand (and their backward)
    kResidualFwd,    // residual kernels: Pre + Post
    kSublayerFwd,    // attention / MLP forward
    kHeadFwd,        // head reduce, final norm, LM head, loss
    kResidualBwdIn,  // residual kernels: BackwardOut + BackwardInput (+ input rebuild)
    kSublayerBwdIn,  // attention / MLP input gradients
    kHeadBwd,        // head input and weight gradients
    kResidualBwdW,   // residual kernels: BackwardWeights (+ input rebuild)
    kSublayerBwdW,   // attention / MLP weight gradients
    kNumPhases
  };
  double seconds[kNumPhases] = {};

  static const char* Name(int p) {
    static const char* const kNames[kNumPhases] = {
        "embed",    "residual_fwd",         "sublayer_fwd",
        "head_fwd", "residual_bwd_input",   "sublayer_bwd_input",
        "head_bwd", "residual_bwd_weights", "sublayer_bwd_weights"};
    return kNames[p];
  }
};

// Adds the scope's wall time to `phase` of `times` (nothing when times is null).
class PhaseScope {
 public:
  PhaseScope(PhaseTimes* times, PhaseTimes::Phase phase) : times_(times), phase_(phase) {
    if (times_) start_ = std::chrono::steady_clock::now();
  }
  ~PhaseScope() {
    if (times_) {
      times_->seconds[phase_] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseTimes* times_;
  PhaseTimes::Phase phase_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_PHASE_TIMES_H_
