#ifndef XHC_RUNTIME_LAB_STUDY_BUBBLES_H_
#define XHC_RUNTIME_LAB_STUDY_BUBBLES_H_

// The two model-based bubbles of a run: the published formula (scheduler/analytic.h) and the
// dependency simulator (scheduler/simulator.h), both fed the run's measured costs.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/lab/study/measure.h"
#include "scheduler/simulator.h"

namespace xhc::study {

struct ModelBubbles {
  // Per rank: formula bubble / (formula bubble + the rank's compute); empty if the schedule
  // has no published formula.
  std::vector<double> analytic;
  std::vector<double> simulated;          // per rank: simulator's bubble fraction
  std::vector<double> simulated_exposed;  // per rank: exposed comm / makespan
  double makespan_ms = 0;
};

// Simulator costs from measured stage costs. The worker runs a full backward as I then W and
// DualPipe's F&B as F then B (no overlap on CPU), so b = i + w and fb = f + b. payload_bytes
// is one stage boundary's [tokens, N, C] float32 state; transfer_ms < 0 means free transfers.
scheduler::SimCosts CostsFrom(const StageCosts& stage, double payload_bytes, double transfer_ms);

absl::StatusOr<ModelBubbles> ComputeModelBubbles(const std::string& schedule, int num_ranks,
                                                 int num_microbatches,
                                                 const scheduler::SimCosts& costs);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_BUBBLES_H_
