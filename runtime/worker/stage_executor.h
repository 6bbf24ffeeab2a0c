#ifndef XHC_RUNTIME_WORKER_STAGE_EXECUTOR_H_
#define XHC_RUNTIME_WORKER_STAGE_EXECUTOR_H_

// Runs one rank's lowered action list (runtime/plan) for a training step: F, I, W, B and
// overlapped F&B on the stages this rank holds, with every send posted asynchronously and
// every receive posted where the schedule puts it (ahead of its consumer), so the transfer
// of the [tokens, N, C] state overlaps compute. Only the consuming compute action waits. Every
// payload carries a stamp (payload_stamp.h: sender, boundary, micro-batch, step, send time):
// the part of a wait before the peer posted its send is recorded as waiting on the peer (a
// bubble), only the rest as exposed communication.
//
// Micro-batch data comes from the deterministic sampler on the ranks that need it (tokens
// for stage 0, targets for the loss stage): no data is shipped.
//
// On a device (stage_executor_device.cc, docs/design/device-streams.md) the same actions are
// enqueued instead of run: compute on a compute stream (the backward half of an overlapped
// F&B pair on a second one), every transfer (posting receives, waiting for them, copying the
// state between the transport's host buffers and the device, posting sends) on a copy stream,
// ordered by events; the host waits once, at the step's end, and the spans come from the
// events. Without a device every action runs on the calling thread.
//
// Data parallelism (plan.data_parallel = D > 1): `rank` is the world rank; this executor runs
// its pipeline rank's actions on its replica's block of micro-batches, and once a held
// stage's last gradient action of the step is done it launches that stage's exchange with
// the other replicas (ReplicaReducer), waited for before the norm and the optimizer.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/xhc.pb.h"
#include "runtime/common/config.h"
#include "runtime/data/corpus.h"
#include "runtime/data/sampler.h"
#include "runtime/device/device.h"
#include "runtime/model/params.h"
#include "runtime/model/stage.h"
#include "runtime/plan/plan.h"
#include "runtime/transport/transport.h"
#include "runtime/worker/buffer_pool.h"
#include "runtime/worker/payload_stamp.h"
#include "runtime/worker/replica_reducer.h"

namespace xhc::worker {

struct StepOutcome {
  std::map<int, double> losses;    // micro-batch → loss (loss-stage holders only)
  std::vector<double> val_losses;  // per eval batch (loss-stage holders, when evaluating)
  // comm_wait_s: transfers the rank waited for after their data existed (exposed
  // communication); peer_wait_s: waits for peers still computing (dependencies, imbalance).
  double step_s = 0, compute_s = 0, comm_wait_s = 0, peer_wait_s = 0;
  double grad_norm = 0;
  double replica_reduce_wait_s = 0;  // blocked on the replicas' gradient exchange (exposed)
  std::vector<proto::Span> spans;
};

class StageExecutor {
 public:
  // `transport` and `corpus` must outlive the executor. Parameters of every held stage are
  // built and initialised from (seed, name), identically on every layout.
  // `device`, when given, must outlive the executor too (see the header comment).
  StageExecutor(const Config& config, const plan::JobPlan& plan, int rank, Transport* transport,
                const Corpus* corpus, device::Device* device = nullptr);
  ~StageExecutor();

  // Runs step `step` (0-based): the action list, the DualPipe mirror-gradient sums, the global
  // gradient norm (all-reduce) and the AdamW update. With `evaluate`, also the validation
  // forward passes.
  absl::StatusOr<StepOutcome> RunStep(int64_t step, int64_t total_steps, bool evaluate);

  // Parameters of each held stage (stage index → set).
  std::map<int, model::ParamSetT<float>*> Stages();
  // True when this rank's copy of `stage` is the canonical one (written to checkpoints).
  // With data parallelism only replica 0 holds canonical copies.
  bool IsCanonical(int stage) const {
    return replica_ == 0 && plan_.IsCanonicalHolder(pipeline_rank_, stage);
  }
  int64_t actions_done() const { return actions_done_; }

  // Tests only, with a device: the compute stream no longer waits for a received input's copy
  // (the mutation a missing WaitEvent would be), so a test can show its checks catch it.
  void DropInputWaitForTest() { drop_input_wait_for_test_ = true; }

 private:
  struct Key {
    int stage, mb;
    bool operator<(const Key& o) const { return stage != o.stage ? stage < o.stage : mb < o.mb; }
  };
  struct PendingRecv {
    std::vector<float> buffer;  // payload + kStampFloats
    std::unique_ptr<Request> request;
    PayloadStamp expected;
  };
  // Span tracks (trace.json threads): compute, communication, waiting on peers, and (on a
  // device) the copy stream's transfers, which are not waits and count in no total.
  enum Track { kCompute = 0, kComm = 1, kPeerWait = 2, kTransfer = 3 };

  // `index`: the action's place in this rank's list.
  // RunStep's parts, in order.
  void ResetForStep(int64_t step);
  absl::Status RunActions(int64_t step);
  absl::Status FinishStepTraffic();
  absl::Status ApplyUpdate(int64_t step, int64_t total_steps, StepOutcome* out);
  absl::Status Execute(const scheduler::Action& a, size_t index, int64_t step);
  absl::Status Forward(int stage, int mb, int64_t step);
  absl::Status BackwardInput(int stage, int mb);
  // `last`: the stage's last weight pass of the step (its mirror sums then leave as each
  // group of parameters is done).
  absl::Status BackwardWeight(int stage, int mb, bool last);
  absl::Status PostRecv(bool forward, int stage, int mb, int peer);
  absl::Status PostSend(bool forward, int stage, int mb, int peer);
  // Stamps and posts the send of a just-produced output (forward activation or input grad).
  absl::Status SendNow(bool forward, int stage, int mb, int peer, std::vector<float> buffer);
  // DualPipe's mirror-gradient sum of `stage` with its other replica: the receives of every
  // held stage with a REDUCE_GRAD posted when the step starts; the sends during the stage's
  // last weight pass, each group of parameters as soon as its sums are final
  // (PostMirrorSends), and any left at its REDUCE_GRAD, so the exchange overlaps the rest of
  // the pass and of the step; finished (waited for and added) by FinishMirror before
  // anything reads the stage's gradients.
  absl::Status PostMirrorRecvs();
  absl::Status PostMirrorSends(int stage, const std::vector<model::ParamT<float>*>& group);
  absl::Status PostMirror(int stage, int peer);
  absl::Status FinishMirror(int stage);
  absl::Status FinishMirrors();
  absl::StatusOr<std::vector<float>> TakeInput(std::map<Key, PendingRecv>* recvs,
                                               std::map<Key, std::vector<float>>* local, Key key,
                                               const char* what);
  absl::Status Evaluate(StepOutcome* out);
  absl::Status FinishSends();
  // `mb` >= 0: a compute span's micro-batch of this replica (the span records its global number).
  void AddSpan(const std::string& name, int track, absl::Time start, absl::Time end, int mb = -1);
  // A blocking wait on data that `ready` says became available at that time: split into a
  // peer-wait span and an exposed-communication span named `name`.
  void AddWaitSpans(const std::string& name, absl::Time start, absl::Time end, absl::Time ready);
  // The step-end gradient norm: every rank's sum of squares, added in rank order, with the
  // wait for the last rank to arrive recorded as waiting on peers. Up to kDirectNormRanks
  // ranks, each sends its pair (arrival, sum) to every other rank, whose receives were posted
  // when the step started (PostNormRecvs); larger worlds use one all-reduce.
  absl::StatusOr<double> AllReduceGradNorm(double local_sum_of_squares);
  absl::Status PostNormRecvs();
  bool DirectNorm() const;
  double LocalGradSumOfSquares() const;
  absl::Status ReduceAcrossReplicas();

  // The device path (stage_executor_device.cc): RunActions' counterpart, and its parts.
  struct DeviceLanes;
  struct DeviceState;
  struct DeviceRecv;
  absl::Status RunActionsOnDevice(int64_t step);
  absl::Status EnqueueAction(const scheduler::Action& a, size_t index, int64_t step);
  absl::Status EnqueueForward(int stage, int mb, int64_t step, bool second_stream);
  absl::Status EnqueueBackwardInput(int stage, int mb, bool second_stream);
  absl::Status EnqueueBackwardWeight(int stage, int mb, bool second_stream);
  absl::Status EnqueuePostRecv(bool forward, int stage, int mb, int peer);
  absl::Status EnqueueSend(bool forward, int stage, int mb, int peer, DeviceState state);
  absl::Status EnqueueMirror(int stage, int peer);
  // The input of (stage, mb) made ready for `stream`: received (waited for, copied to the
  // device) or handed over on this rank.
  // `waited`: the receive it waited for, if any (its stamp splits the wait in the spans).
  absl::StatusOr<DeviceState> TakeDeviceInput(bool forward, int stage, int mb,
                                              device::Stream& stream,
                                              std::shared_ptr<DeviceRecv>* waited);
  // `stream` waits for the stage's previous op, wherever it ran; the op's events recorded.
  absl::Status EnqueueCompute(device::Stream& stream, int stage, int mb, const std::string& name,
                              std::shared_ptr<DeviceRecv> waited, std::function<absl::Status()> op);
  absl::Status FinishDeviceStep();

  Config config_;
  const plan::JobPlan& plan_;
  int rank_;
  Transport* transport_;
  BatchSampler sampler_;
  std::unique_ptr<BatchSampler> val_sampler_;
  absl::Duration timeout_;
  std::map<int, std::unique_ptr<model::ParamSetT<float>>> params_;
  std::map<int, std::unique_ptr<model::StageModel>> models_;
  // Step-local buffers.
  std::map<Key, PendingRecv> recv_fwd_, recv_bwd_;
  std::map<Key, std::vector<float>> local_fwd_, local_bwd_;  // handed over on this rank
  std::map<Key, int> sent_fwd_, sent_bwd_;  // sent (to that rank), its SEND action still ahead
  std::vector<std::pair<std::unique_ptr<Request>, std::vector<float>>> sends_;
  // A stage's mirror exchange: per parameter, its grad_acc is sent in place and the other
  // replica's lands in `theirs` (kept across steps: sized once, never cleared).
  struct MirrorExchange {
    int peer = -1;  // world rank of the other replica
    std::vector<std::vector<double>> theirs;
    std::vector<std::unique_ptr<Request>> recvs;       // empty: none in flight
    std::vector<std::unique_ptr<Request>> sends;       // by parameter index; null: not yet posted
    std::map<const model::ParamT<float>*, int> index;  // parameter -> index (its tag)
    bool reduce_grad_ran = false;                      // this step
  };
  std::map<int, MirrorExchange> mirrors_;   // by stage, the stages with a REDUCE_GRAD
  std::map<size_t, int> last_weight_pass_;  // action index -> a mirrored stage's last W
  // The direct norm exchange: per world rank, its (arrival time in unix us, sum of squares)
  // (this rank's: the send buffer), and the receives posted for this step (null: none).
  std::vector<std::array<double, 2>> norm_slots_;
  std::vector<std::unique_ptr<Request>> norm_recvs_;
  BufferPool buffers_;  // the above's payloads, recycled once consumed or sent
  std::map<int, TokenBatch> batches_;
  // Data parallelism: this rank's replica and pipeline rank; the reducer (null when D = 1);
  // for each index of the action list, the held stages whose gradient is complete after it.
  int replica_ = 0, pipeline_rank_ = 0;
  std::unique_ptr<ReplicaReducer> reducer_;
  std::map<size_t, std::vector<int>> grads_done_after_;
  // XHC_REPLICA_REDUCE_BLOCKING=1: wait for each exchange as soon as it is launched, so the
  // reported wait is the exchange's whole duration (the baseline of the hidden fraction).
  bool blocking_replica_reduce_ = false;
  StepOutcome* outcome_ = nullptr;
  int64_t step_ = 0;  // of the step running (payload stamps)
  int64_t actions_done_ = 0;
  device::Device* device_ = nullptr;
  std::unique_ptr<DeviceLanes> lanes_;  // with a device: its streams and the step's records
  bool drop_input_wait_for_test_ = false;
};

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_STAGE_EXECUTOR_H_
