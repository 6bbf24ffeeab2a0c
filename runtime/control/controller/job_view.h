#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_JOB_VIEW_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_JOB_VIEW_H_

// What the controller has seen of a job, as plain values: one record per step, checkpoint
// and recovery, in the order they happened. The controller builds each record once; the
// metrics.jsonl line (MetricsLine), the live dashboard and /metrics are all made from that
// same record, so they cannot disagree. JobView is a copy taken under the controller's lock
// (Controller::View) for readers on other threads, who render it outside the lock.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/xhc.pb.h"

namespace xhc::controller {

struct StepRecord {
  int64_t step = 0;      // steps done after it (1-based, as in metrics.jsonl)
  int generation = 0;    // a step re-run after a rollback has a higher generation
  double wall_time = 0;  // unix seconds when it finished
  double loss = 0, grad_norm = 0, step_s = 0, tokens_per_s = 0;
  std::vector<double> microbatch_losses;
  // Per rank, as fractions of its step: exposed communication (transfers waited for after
  // their data existed), waiting on peers still computing, not computing; and the peak
  // resident memory.
  std::vector<double> exposed_comm, peer_wait, bubble, peak_rss_mb;
  // Per rank, as a fraction of its step: CPU time its threads besides the compute took (the
  // transport's, gRPC's), which on a machine whose cores all compute comes out of compute.
  std::vector<double> other_cpu;
  // Data parallelism (empty when D = 1): seconds each rank waited for the replicas' gradient
  // exchange after its backward.
  std::vector<double> replica_grad_wait_s;
  std::optional<double> val_loss;
};

struct CheckpointRecord {
  int64_t step = 0;
  double wall_time = 0;
  int64_t bytes = 0;
  double snapshot_stall_s = 0;  // slowest rank's copy on the compute thread
  double write_s = 0;           // slowest rank's write + fsync
  double commit_latency_s = 0;  // request to commit
  bool async = false;
};

struct RecoveryRecord {
  int generation = 0;        // the generation the job continued in
  double wall_time = 0;      // when it had recovered
  int64_t failed_step = 0;   // the step that was running (1-based)
  int64_t resumed_step = 0;  // the checkpoint's step it rolled back to
  std::vector<int> replaced_ranks;
  std::string reason;  // the failure that started it
  double seconds = 0;  // failure detected -> every rank ready again
};

struct WorkerView {
  int rank = 0;
  std::string worker_id, host;
  int pid = 0;
  // "alive", "dead" (stream closed), "hung" (heartbeats stopped), "joining" (registered,
  // stream not yet open) or "not registered" (waiting for a process to take the rank).
  std::string health;
  double heartbeat_age_s = 0;
  int64_t actions_done = 0;  // the heartbeat's progress counter
  int64_t step = 0;          // the last step this rank reported done
  int64_t epoch = 0;         // bumps when a process registers for the rank or is replaced
};

struct JobView {
  std::string job_id, state, schedule, residual;
  int num_workers = 0, num_stages = 0, generation = 0;
  int restarts = 0, max_restarts = 0;
  int64_t step = 0, total_steps = 0;
  double heartbeat_timeout_s = 0;
  std::vector<WorkerView> workers;
  // Records from the indices asked for on (Controller::View's arguments) to the newest.
  int64_t steps_from = 0, checkpoints_from = 0;
  std::vector<StepRecord> steps;
  std::vector<CheckpointRecord> checkpoints;
  std::vector<RecoveryRecord> recoveries;  // always all of them (few)
  int64_t num_steps_recorded = 0, num_checkpoints_recorded = 0;
  // The newest step's spans (the same ones trace.json gets) and the rank of each.
  int64_t spans_step = 0;
  std::vector<proto::Span> last_step_spans;
  std::vector<int> last_step_span_ranks;
};

// The metrics.jsonl line of a record (with its newline).
std::string MetricsLine(const StepRecord& r);
std::string MetricsLine(const CheckpointRecord& r);

// Seconds since the Unix epoch, now.
double WallTime();

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_JOB_VIEW_H_
