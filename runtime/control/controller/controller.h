#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_H_

// The job's controller logic, independent of gRPC (controller_service.h is the thin adapter):
// registration and rank assignment, the rendezvous key-value store, worker liveness from the
// heartbeat streams, and Run(), which drives steps and checkpoints and aggregates reports
// into progress lines, metrics.jsonl and a merged Chrome trace.
//
// Thread safety: every public method may be called from any gRPC handler thread; Run() is
// called once, from its own thread.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/xhc.pb.h"
#include "runtime/common/config.h"
#include "runtime/common/eta.h"
#include "runtime/control/controller/job_view.h"
#include "runtime/plan/plan.h"

namespace xhc::controller {

struct ControllerOptions {
  int workers = 1;        // pipeline ranks per replica
  int data_parallel = 0;  // pipeline replicas (0 = pipeline.data_parallel); the job
                          // waits for data_parallel x workers worker processes
  int64_t steps = -1;     // total steps (train.steps when < 0)
  std::string run_dir;    // metrics.jsonl, trace.json, checkpoints/
  double register_timeout_s = 120;
  bool quiet = false;   // no progress lines on stdout
  bool resume = false;  // start from run_dir/checkpoints (LATEST or older)
  // Replaces a dead or hung worker (xhc launch: kill it if still there, start a new process
  // with the same rank hint). Unset: wait for an external worker to register instead.
  std::function<absl::Status(int rank)> restart_worker;
  double replace_timeout_s = 120;  // how long to wait for replacements to join
};

class Controller {
 public:
  // Which reports a wait is for: their kind and the step (the generation for ready reports).
  struct ReportKey {
    proto::StepReport::KindCase kind;
    int64_t id;
    auto operator<=>(const ReportKey&) const = default;
  };
  static ReportKey KeyOf(const proto::StepReport& report);
  using Clock = std::chrono::steady_clock;

  // Validates the plan before any worker starts (bad schedule/worker counts are errors
  // naming the config key).
  static absl::StatusOr<std::unique_ptr<Controller>> Create(const Config& config,
                                                            const ControllerOptions& options);

  // --- RPC logic ---
  absl::StatusOr<proto::RegisterResponse> Register(const proto::RegisterRequest& request);
  void KvSet(const std::string& key, const std::string& value);
  // Blocks until every key is present (kDeadlineExceeded naming the missing keys).
  absl::StatusOr<std::vector<std::string>> KvGet(const std::vector<std::string>& keys,
                                                 double timeout_s);
  // A worker's heartbeat stream opened for its registration `epoch` (RegisterResponse.epoch)
  // / delivered a beat / closed (closed = dead). Attach refuses a stream for a rank with no
  // registered worker, for a registration the rank has since been given away from (a
  // replaced worker: kFailedPrecondition, "fenced"), or a second stream for one
  // registration (kAlreadyExists): one rank, one worker, one stream. Beats and closes from
  // a stream of an older epoch are ignored.
  absl::Status Attach(int rank, int64_t epoch);
  void Heartbeat(int rank, const proto::Heartbeat& beat, int64_t epoch);
  void Detach(int rank, int64_t epoch, const std::string& why);
  // The next command for `rank` (blocks up to timeout_s; nullopt on timeout or shutdown).
  // Sets *stale when the stream's epoch is no longer current (its writer should stop).
  std::optional<proto::Command> NextCommand(int rank, int64_t epoch, double timeout_s, bool* stale);
  // Refuses a report from a fenced registration (kFailedPrecondition) and more than
  // kMaxPendingReportsPerRank uncollected reports from one rank (kResourceExhausted); drops
  // (OK) reports of an aborted generation.
  absl::Status Report(const proto::StepReport& report);
  // A worker has at most a step result, a checkpoint shard and a ready report in flight;
  // the bound keeps a misbehaving client from growing the controller without limit.
  static constexpr int kMaxPendingReportsPerRank = 16;
  proto::StatusResponse Status();
  // A copy of the job's state for the dashboard and /metrics, taken under the lock: the
  // records from the given indices on (pass the counts already seen to get only what is
  // new; a negative index counts from the end, so -1 is the newest only), every recovery,
  // and the newest step's spans. Render it outside the lock.
  JobView View(int64_t steps_from, int64_t checkpoints_from);

  // Drives the whole job; returns when it finished (OK) or cannot continue.
  absl::Status Run();
  // Makes NextCommand/KvGet waiters return (server shutdown).
  void Stop();

  // The launcher saw the process meant to be `rank` exit. Before that rank has joined this
  // fails the job at once (no point waiting out the registration timeout); after, the broken
  // heartbeat stream already tells.
  void WorkerProcessExited(int rank, const std::string& why);

  // Sets ControllerOptions::restart_worker (before Run).
  void SetRestartWorker(std::function<absl::Status(int rank)> restart) {
    options_.restart_worker = std::move(restart);
  }

  const plan::JobPlan& plan() const { return plan_; }
  const Config& config() const { return config_; }

 private:
  struct Worker {
    bool registered = false, attached = false, alive = false;
    std::string worker_id, address;
    int pid = 0;
    Clock::time_point last_beat;
    int64_t progress = 0;
    int64_t epoch = 0;          // bumps at every registration of this rank
    int64_t step_done = 0;      // the last step this rank reported
    Clock::time_point lost_at;  // when its stream closed
    std::deque<proto::Command> outbox;
  };

  Controller(const Config& config, const ControllerOptions& options, plan::JobPlan plan);
  absl::Status WaitForWorkers();
  void Broadcast(const proto::Command& command);
  // Waits for one report of `key` from every rank (kUnavailable if a worker dies).
  absl::StatusOr<std::vector<proto::StepReport>> CollectReports(ReportKey key, double timeout_s);
  absl::Status RunStep(int64_t step, bool evaluate);
  // RunStep's parts: the step's record from the ranks' reports; the record kept (metrics.jsonl,
  // the trace, the live view); the progress line.
  StepRecord MakeStepRecord(int64_t step, double step_s,
                            const std::vector<proto::StepReport>& reports) const;
  void RecordStep(const StepRecord& rec, const std::vector<proto::StepReport>& reports);
  void PrintStep(const StepRecord& rec) const;
  // Builds generation_'s data plane on every worker from `checkpoint_dir` ("" = initial
  // weights) and waits until all report ready.
  absl::Status ResumeAll(const std::string& checkpoint_dir);
  // After `failure`: abort, replace dead/hung workers, reload the newest valid checkpoint.
  // Returns the step to continue from.
  absl::StatusOr<int64_t> Recover(const absl::Status& failure, int64_t failed_step);
  // Ranks whose stream closed or whose heartbeats stopped.
  std::vector<int> DeadOrHungRanks();
  // Asks every worker for its shard of `step` (async: returns at once, committed later by
  // FinishCheckpoint once every shard is durable).
  absl::Status Checkpoint(int64_t step);
  // Commits the pending checkpoint once all shards are reported; with block = false only if
  // they already are.
  absl::Status FinishCheckpoint(bool block);
  bool ReportsComplete(ReportKey key);
  void WriteTrace();
  absl::Status FirstDeadWorker() const;  // requires mu_

  Config config_;
  ControllerOptions options_;
  plan::JobPlan plan_;
  std::string config_hash_;
  int world_size_ = 0;  // worker processes: plan_.world_size()
  std::string job_id_;
  int64_t total_steps_ = 0;
  int64_t start_step_ = 0;
  std::string resume_from_;
  int generation_ = 0;
  std::string startup_failure_;  // set by WorkerProcessExited (guarded by mu_)
  int64_t pending_ckpt_ = -1;    // step of the checkpoint being written, or -1
  Clock::time_point pending_ckpt_t0_;
  int restarts_used_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  bool finished_ = false;  // SHUTDOWN sent: workers leaving is expected
  std::vector<Worker> workers_;
  std::map<std::string, std::string> kv_;
  std::map<std::pair<ReportKey, int>, proto::StepReport> reports_;  // (key, rank)
  std::unique_ptr<EtaEstimator> eta_;  // progress lines; made at the first step
  // Progress for `xhc status`.
  std::string state_ = "waiting for workers";
  int64_t current_step_ = 0;
  double last_loss_ = 0, tokens_per_s_ = 0;
  // Every step, checkpoint and recovery, as metrics.jsonl has them (JobView's records).
  std::vector<StepRecord> step_records_;
  std::vector<CheckpointRecord> checkpoint_records_;
  std::vector<RecoveryRecord> recovery_records_;
  int64_t last_spans_step_ = 0;
  std::vector<proto::Span> last_spans_;
  std::vector<int> last_span_ranks_;
  // Run()'s thread only (no lock): every span, for trace.json at the end.
  std::vector<proto::Span> trace_spans_;
  std::vector<int> trace_ranks_;
  std::vector<double> trace_offsets_us_;
};

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_H_
