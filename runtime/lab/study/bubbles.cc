#include "runtime/lab/study/bubbles.h"

#include <algorithm>

#include "base/status_macros.h"
#include "scheduler/analytic.h"
#include "scheduler/schedule.h"

namespace xhc::study {

scheduler::SimCosts CostsFrom(const StageCosts& stage, double payload_bytes, double transfer_ms) {
  scheduler::SimCosts c;
  c.f = stage.f;
  c.i = stage.i;
  c.w = stage.w;
  c.b = stage.i + stage.w;
  c.fb = c.f + c.b;
  c.sequential_pieces = true;  // the worker sends each piece's output as it ends
  c.payload_bytes = payload_bytes;
  // One measured transfer time becomes a bandwidth (no separate latency term): the simulator
  // then charges exactly the measured time per boundary of this payload size.
  if (transfer_ms > 0 && payload_bytes > 0) {
    c.bandwidth_gbps = payload_bytes * 8.0 / (transfer_ms * 1e-3) / 1e9;
  }
  c.reduce_bytes = 0;  // DualPipe's replica grad reduce is not timed per stage here
  return c;
}

absl::StatusOr<ModelBubbles> ComputeModelBubbles(const std::string& schedule, int num_ranks,
                                                 int num_microbatches,
                                                 const scheduler::SimCosts& costs) {
  ASSIGN_OR_RETURN(scheduler::Schedule s,
                   scheduler::BuildSchedule({schedule, num_ranks, num_microbatches, 1}));
  ASSIGN_OR_RETURN(scheduler::SimResult sim, scheduler::Simulate(s, costs));
  ModelBubbles out;
  out.makespan_ms = sim.makespan;
  out.simulated = sim.bubble_fraction;
  for (size_t r = 0; r < sim.exposed_comm.size(); ++r) {
    out.simulated_exposed.push_back(sim.exposed_comm[r] / std::max(sim.makespan, 1e-12));
  }
  // The formula uses free communication, like the papers that publish it.
  scheduler::SimCosts free_comm = costs;
  free_comm.bandwidth_gbps = 0;
  free_comm.latency_us = 0;
  if (std::optional<double> bubble = scheduler::AnalyticBubble(s, free_comm)) {
    for (double busy : sim.busy) out.analytic.push_back(*bubble / std::max(*bubble + busy, 1e-12));
  }
  return out;
}

}  // namespace xhc::study
