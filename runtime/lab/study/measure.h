#ifndef XHC_RUNTIME_LAB_STUDY_MEASURE_H_
#define XHC_RUNTIME_LAB_STUDY_MEASURE_H_

// Measurements of one finished run, from its metrics.jsonl and trace.json (formats written
// by runtime/control/controller: one JSON object per step; a Chrome trace with pid = rank, tid 0
// the compute spans "F3.7" / "I3.7" / "W3.7" / "optimizer", tid 1 the waits "recv F3.7", "recv
// B3.7", "drain sends", "all-reduce grad norm", "reduce grad N"; ts/dur in µs).
// Steps 1..warmup_steps are discarded everywhere.

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc::study {

struct StepMetrics {
  double tokens_per_s = 0;           // mean over kept steps
  double step_s = 0;                 // mean over kept steps
  double loss = 0;                   // last step's loss
  std::vector<double> exposed_comm;  // per rank, mean over kept steps
  // Per rank, mean over kept steps: CPU time of its threads besides the compute, over its
  // step (the transport's, gRPC's; empty if not reported).
  std::vector<double> other_cpu;
  std::vector<double> peak_rss_mb;  // per rank, max over steps (empty if not reported)
  int num_steps = 0;                // kept steps
};

// Mean compute span durations of one stage, in ms.
struct StageCosts {
  double f = 0, i = 0, w = 0;
  int count = 0;  // forward spans seen
};

struct TraceMeasurement {
  // Per rank: 1 - compute / pipeline window, summed over kept steps. The window of a step
  // runs from the first F/I/W start on any rank to the last F/I/W end on any rank, so the
  // optimizer and the grad-norm all-reduce (outside every schedule's model) are excluded.
  std::vector<double> bubble;
  // Per rank: F/I/W compute per kept step (ms, mean): what the rank's share of the model cost
  // it, to compare with a one-rank run's (how much slower the same work ran beside a peer).
  std::vector<double> compute_ms;
  std::vector<double> window_ms;     // per kept step
  std::map<int, StageCosts> stages;  // by stage index
  // Transfer time of one stage boundary (ms), median over receives that waited: the wait
  // ended when the data arrived, so arrival - producer's end is the transfer. -1 if no sample.
  double transfer_ms = -1;
  int transfer_samples = 0;
};

absl::StatusOr<StepMetrics> ParseMetrics(const std::string& jsonl_text, int warmup_steps);
absl::StatusOr<TraceMeasurement> ParseTrace(const std::string& trace_json, int num_ranks,
                                            int warmup_steps);

// Mean of the per-stage costs (the simulator takes one cost per action kind).
StageCosts MeanStageCosts(const TraceMeasurement& trace);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_MEASURE_H_
