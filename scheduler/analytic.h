#ifndef XHC_SCHEDULER_ANALYTIC_H_
#define XHC_SCHEDULER_ANALYTIC_H_

// Published per-rank bubble formulas (uniform costs, free communication). PP is the number
// of stages: R for 1F1B/ZB1P/DualPipe, 2R for DualPipeV (DualPipe with 2R ranks folded).
//   gpipe, 1f1b      (PP-1)(F+B)
//   interleaved1f1b  (R-1)(F+B) with per-chunk F and B (Megatron: (p-1)/v of 1F1B's)
//   zb1p             (PP-1)(F+B-2W)          (B = full backward = I + W)
//   dualpipe(v)      (PP/2-1)(F&B+B-3W)
//   looped_bfs       (R-1)(F+B) with per-chunk F and B, M >= R (breadth-first PP)
//   interleaved_zb   (R-1)(F+I-W) with per-chunk costs, M >= R, W <= min(F, I) (ZB-H1
//                    interleaved)
//   zbv              (R-1)F when F = I = W, M >= 2R-1: no rank's compute stream idles
//                    between its first and last action (zero bubble); the start-up skew of
//                    the parallelogram remains in a one-step makespan (the ZB paper overlaps
//                    it with the next step by dropping the optimizer synchronisation)
// The DualPipe report also states parameters per device (2x for DualPipe, held stages) and
// activations per device (PP for 1F1B, PP+1 for DualPipe); see PeakActivations. ZB-V holds
// 2R half-size chunk activations (1F1B's PP = R stages' worth), looped BFS all V*M (GPipe's),
// interleaved ZB R*V chunk activations when R divides M.

#include <optional>

#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace xhc::scheduler {

// The formula's bubble for this schedule, or nullopt where none is published.
std::optional<double> AnalyticBubble(const Schedule& schedule, const SimCosts& costs);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_ANALYTIC_H_
