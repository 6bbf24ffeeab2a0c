#ifndef XHC_SCHEDULER_SIMULATOR_H_
#define XHC_SCHEDULER_SIMULATOR_H_

// Timed simulation of lowered schedules.
//
// Model (one time unit = 1 ms, so compute costs are in ms):
//  * each rank has a compute stream that runs its compute actions strictly in list order;
//    an action starts when the previous one has finished and every input it needs has
//    arrived (from a local producer or a RECV);
//  * each rank has a communication stream: a SEND is issued when the preceding compute
//    action finishes and occupies the sender's stream, FIFO, for
//    latency + payload / bandwidth; the data arrives at the receiver when it ends. Sends are
//    eager (buffered), so a late RECV post does not hold the sender;
//  * REDUCE_GRAD completes when both replicas have posted it, plus its transfer time;
//  * when no rank can make progress before all are done, the schedule deadlocks and the
//    simulator returns kFailedPrecondition with the grid, stuck actions marked.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/action.h"
#include "scheduler/schedule.h"

namespace xhc::scheduler {

struct SimCosts {
  double f = 1.0;           // forward of one stage
  double b = 2.0;           // full backward
  double i = 1.0;           // backward for inputs only
  double w = 1.0;           // deferred weight gradient
  double fb = -1.0;         // overlapped F&B; < 0 means f + b - fb_overlap * min(f, b)
  double fb_overlap = 0.0;  // in [0, 1]: how much of the shorter half hides
  // Point-to-point transfer of one stage boundary: latency + payload / bandwidth.
  double latency_us = 0.0;
  double payload_bytes = 0.0;   // see PayloadBytes
  double bandwidth_gbps = 0.0;  // gigabits per second; <= 0 means infinitely fast
  double reduce_bytes = 0.0;    // REDUCE_GRAD payload (one stage's weight grads)
  // Memory one stage keeps for each micro-batch from its forward to its last backward action:
  // the [tokens, N, C] state saved for backward (ActivationBytes; 16x a plain residual's for
  // N = 16). 0 = unknown. The sublayers' own saved activations, which grow with the stage's
  // layers, are not counted.
  double activation_bytes = 0.0;
  // The executor runs a composite action piece by piece and sends each piece's output when
  // that piece ends (the CPU worker: a full B as I then W, its input gradient leaving after
  // I; an F&B pair as F then I then W, the activation leaving after F). Requires b = i + w
  // and fb = f + b. Otherwise outputs leave at the end of the whole action.
  bool sequential_pieces = false;

  double FB() const;
  double P2PTime(double bytes) const;  // in ms
};

// The stage-boundary payload: the [tokens, N, C] residual state of the xHC model.
inline double PayloadBytes(int64_t tokens, int num_streams, int channels, int bytes_per_elem) {
  return static_cast<double>(tokens) * num_streams * channels * bytes_per_elem;
}

// What one held (stage, micro-batch) activation keeps: the same [tokens, N, C] state.
inline double ActivationBytes(int64_t tokens, int num_streams, int channels, int bytes_per_elem) {
  return PayloadBytes(tokens, num_streams, channels, bytes_per_elem);
}

struct TimedAction {
  Action action;
  double start = 0.0;
  double end = 0.0;
  bool on_comm_stream = false;
};

struct SimResult {
  double makespan = 0.0;
  std::vector<double> busy;                        // per rank: compute time
  std::vector<double> bubble;                      // per rank: makespan - busy
  std::vector<double> bubble_fraction;             // per rank: bubble / makespan
  std::vector<double> exposed_comm;                // per rank: compute waits caused by transfers
  std::vector<int> peak_activations;               // per rank
  std::vector<double> peak_activation_bytes;       // per rank: peak_activations x activation_bytes
  std::vector<std::vector<TimedAction>> timeline;  // per rank, compute and comm
};

// Peak number of (stage, micro-batch) activations held per rank, in list order: an F
// allocates, a B or W frees (an I keeps what its W still needs); an FB allocates first.
std::vector<int> PeakActivations(const std::vector<std::vector<Action>>& lists);

// Simulates lowered lists over `layout`'s stage ownership.
absl::StatusOr<SimResult> Simulate(const Schedule& layout,
                                   const std::vector<std::vector<Action>>& lowered,
                                   const SimCosts& costs);
// Lowers `schedule` and simulates it.
absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const SimCosts& costs);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_SIMULATOR_H_
