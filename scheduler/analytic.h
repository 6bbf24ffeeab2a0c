#ifndef XHC_SCHEDULER_ANALYTIC_H_
#define XHC_SCHEDULER_ANALYTIC_H_

// Published per-rank bubble formulas (uniform costs, free communication). PP is the number
// of stages: R for 1F1B/ZB1P/DualPipe, 2R for DualPipeV (DualPipe with 2R ranks folded).
//   gpipe, 1f1b      (PP-1)(F+B)
//   interleaved1f1b  (R-1)(F+B) with per-chunk F and B (Megatron: (p-1)/v of 1F1B's)
//   zb1p             (PP-1)(F+B-2W)          (B = full backward = I + W)
//   dualpipe(v)      (PP/2-1)(F&B+B-3W)
// The DualPipe report also states parameters per device (2x for DualPipe, held stages) and
// activations per device (PP for 1F1B, PP+1 for DualPipe); see PeakActivations.

#include <optional>

#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace xhc::scheduler {

// The formula's bubble for this schedule, or nullopt where none is published.
std::optional<double> AnalyticBubble(const Schedule& schedule, const SimCosts& costs);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_ANALYTIC_H_
