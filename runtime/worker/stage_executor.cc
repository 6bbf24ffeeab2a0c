#include "runtime/worker/stage_executor.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/train/optimizer.h"
#include "runtime/worker/stage_executor_device_lanes.h"

namespace xhc::worker {
namespace {

using scheduler::Action;
using scheduler::ActionType;

std::string Name(const char* what, int stage, int mb) { return absl::StrCat(what, stage, ".", mb); }

}  // namespace

StageExecutor::StageExecutor(const Config& config, const plan::JobPlan& plan, int rank,
                             Transport* transport, const Corpus* corpus, device::Device* device)
    : config_(config),
      plan_(plan),
      rank_(rank),
      transport_(transport),
      sampler_(&corpus->train, config.train.seed, config.train.batch_size, config.model.seq_len),
      val_sampler_(std::make_unique<BatchSampler>(&corpus->val, config.train.seed,
                                                  config.train.batch_size, config.model.seq_len)),
      timeout_(absl::Seconds(config.fault.step_timeout_s)),
      replica_(plan.ReplicaOf(rank)),
      pipeline_rank_(plan.PipelineRankOf(rank)),
      device_(device) {
  for (int s : plan.StagesOf(pipeline_rank_)) {
    auto ps = std::make_unique<model::ParamSetT<float>>(
        model::BuildStageParams<float>(config.model, plan.stages[s]));
    model::InitParams(config.model, config.train.seed, ps.get());
    models_[s] = std::make_unique<model::StageModel>(config.model, plan.stages[s], ps.get());
    params_[s] = std::move(ps);
  }
  // DualPipe's mirrored stages (a REDUCE_GRAD each): the other replica, each parameter's
  // index, and the stage's last weight pass, which sends the sums as they become final. Only
  // when no weight pass of the stage follows its REDUCE_GRAD (the lowering puts it after the
  // last): a later one would change sums already sent.
  std::map<int, size_t> last_w, reduce_at;
  const std::vector<Action>& list = plan.lowered[pipeline_rank_];
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].type == ActionType::kReduceGrad) {
      MirrorExchange& m = mirrors_[list[i].stage_idx];
      m.peer = plan.WorldRank(replica_, list[i].peer_rank);
      const auto& params = params_.at(list[i].stage_idx)->all();
      for (size_t p = 0; p < params.size(); ++p) m.index[params[p].get()] = static_cast<int>(p);
      reduce_at[list[i].stage_idx] = i;
    } else if (list[i].WeightGradStage() >= 0) {
      last_w[list[i].WeightGradStage()] = i;
    }
  }
  for (const auto& [stage, i] : reduce_at) {
    if (auto it = last_w.find(stage); it != last_w.end() && it->second < i) {
      last_weight_pass_[it->second] = stage;
    }
  }
  if (plan.data_parallel > 1) {
    std::vector<int> group;
    for (int r = 0; r < plan.data_parallel; ++r) group.push_back(plan.WorldRank(r, pipeline_rank_));
    reducer_ = std::make_unique<ReplicaReducer>(transport, std::move(group), replica_, timeout_);
    // A stage's gradient is complete after its last W (or B, or the backward half of an
    // overlapped F&B), or after the DualPipe mirror sum when there is one.
    std::map<int, size_t> last;
    const std::vector<Action>& actions = plan.lowered[pipeline_rank_];
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      const int stage = a.type == ActionType::kReduceGrad ? a.stage_idx : a.WeightGradStage();
      if (stage >= 0) last[stage] = i;
    }
    for (const auto& [stage, i] : last) grads_done_after_[i].push_back(stage);
    const char* blocking = std::getenv("XHC_REPLICA_REDUCE_BLOCKING");
    blocking_replica_reduce_ = blocking != nullptr && std::string(blocking) == "1";
  }
}

std::map<int, model::ParamSetT<float>*> StageExecutor::Stages() {
  std::map<int, model::ParamSetT<float>*> out;
  for (auto& [s, ps] : params_) out[s] = ps.get();
  return out;
}

void StageExecutor::AddSpan(const std::string& name, int track, absl::Time start, absl::Time end,
                            int mb) {
  proto::Span span;
  span.set_name(name);
  if (mb >= 0) span.set_microbatch(plan_.GlobalMicrobatch(replica_, mb));
  span.set_track(track);
  span.set_start_us(static_cast<double>(absl::ToUnixMicros(start)));
  span.set_dur_us(absl::ToDoubleMicroseconds(end - start));
  const double s = absl::ToDoubleSeconds(end - start);
  if (track == kTransfer) {  // the copy stream's work: shown, never a wait
    outcome_->spans.push_back(std::move(span));
    return;
  }
  (track == kCompute ? outcome_->compute_s
   : track == kComm  ? outcome_->comm_wait_s
                     : outcome_->peer_wait_s) += s;
  outcome_->spans.push_back(std::move(span));
}

void StageExecutor::AddWaitSpans(const std::string& name, absl::Time start, absl::Time end,
                                 absl::Time ready) {
  const WaitSplit split =
      SplitWait(absl::ToUnixMicros(start), absl::ToUnixMicros(end), absl::ToUnixMicros(ready));
  const absl::Time peer_done = start + absl::Microseconds(split.peer_us);
  if (split.peer_us > 0) AddSpan(absl::StrCat("wait peer ", name), kPeerWait, start, peer_done);
  AddSpan(name, kComm, peer_done, end);
}

absl::StatusOr<std::vector<float>> StageExecutor::TakeInput(
    std::map<Key, PendingRecv>* recvs, std::map<Key, std::vector<float>>* local, Key key,
    const char* what) {
  if (auto it = recvs->find(key); it != recvs->end()) {
    const std::string name = Name(what, key.stage, key.mb);
    const absl::Time t0 = absl::Now();
    absl::Status s = it->second.request->Wait(timeout_);
    const absl::Time t1 = absl::Now();
    if (!s.ok()) {
      AddSpan(name, kComm, t0, t1);
      return s;
    }
    std::vector<float> buffer = std::move(it->second.buffer);
    const PayloadStamp expected = it->second.expected;
    recvs->erase(it);
    ASSIGN_OR_RETURN(const PayloadStamp stamp,
                     ReadStamp(buffer.data(), buffer.size() - kStampFloats, expected,
                               absl::StrCat("rank ", rank_, ": ", name)));
    AddWaitSpans(name, t0, t1, absl::FromUnixMicros(stamp.send_unix_us));
    return buffer;
  }
  if (auto it = local->find(key); it != local->end()) {
    std::vector<float> buffer = std::move(it->second);
    local->erase(it);
    return buffer;
  }
  return absl::InternalError(absl::StrCat("rank ", rank_, ": ", Name(what, key.stage, key.mb),
                                          " has no input (neither received nor produced here)"));
}

absl::Status StageExecutor::PostRecv(bool forward, int stage, int mb, int peer) {
  // Tags name the boundary below the receiving side: forward activations entering stage s
  // cross boundary s-1; gradients entering stage s (from s+1) cross boundary s.
  const uint64_t tag = forward ? MakeTag(TagKind::kForwardActivation, stage - 1, mb)
                               : MakeTag(TagKind::kBackwardGradient, stage, mb);
  PendingRecv recv;
  recv.buffer = buffers_.Take(
      static_cast<size_t>(models_.at(stage)->StateElements(config_.train.batch_size)) +
      kStampFloats);
  recv.expected = {peer, forward ? stage - 1 : stage, mb, step_, 0};
  ASSIGN_OR_RETURN(recv.request,
                   transport_->Irecv(peer, tag, recv.buffer.data(), recv.buffer.size()));
  // A post that copied an already-arrived payload (Transport::Irecv's contract) spent this
  // thread's time on communication: a span on that track, ending now
  // (docs/design/pipeline-wait-accounting.md).
  if (const absl::Duration copy = recv.request->PostCopyTime(); copy > absl::ZeroDuration()) {
    const absl::Time end = absl::Now();
    AddSpan(Name(forward ? "post recv F" : "post recv B", stage, mb), kComm, end - copy, end);
  }
  (forward ? recv_fwd_ : recv_bwd_)[{stage, mb}] = std::move(recv);
  return absl::OkStatus();
}

absl::Status StageExecutor::SendNow(bool forward, int stage, int mb, int peer,
                                    std::vector<float> buffer) {
  const uint64_t tag = forward ? MakeTag(TagKind::kForwardActivation, stage, mb)
                               : MakeTag(TagKind::kBackwardGradient, stage - 1, mb);
  sends_.emplace_back(nullptr, std::move(buffer));
  std::vector<float>& b = sends_.back().second;
  WriteStamp({rank_, forward ? stage : stage - 1, mb, step_, absl::ToUnixMicros(absl::Now())},
             b.data(), b.size() - kStampFloats);
  // Timed, as communication: a transport that writes the payload from the calling thread
  // (gloo does where the peer's receive is already posted, ~1.2 ms per 4 MiB state here)
  // holds the compute thread for that long; GlooTransport posts from its own thread instead
  // (post_thread.h, docs/design/transport-post-thread.md), and this span shows what is left.
  const absl::Time t0 = absl::Now();
  ASSIGN_OR_RETURN(sends_.back().first, transport_->Isend(peer, tag, b.data(), b.size()));
  AddSpan(Name(forward ? "send F" : "send B", stage, mb), kComm, t0, absl::Now());
  (forward ? sent_fwd_ : sent_bwd_)[{stage, mb}] = peer;
  return absl::OkStatus();
}

absl::Status StageExecutor::PostSend(bool forward, int stage, int mb, int peer) {
  // The send itself went out when its producer finished (SendNow); the schedule's SEND action
  // only confirms that it went where the schedule says.
  auto& sent = forward ? sent_fwd_ : sent_bwd_;
  const std::string what = Name(forward ? "SEND_F" : "SEND_B", stage, mb);
  auto it = sent.find({stage, mb});
  if (it == sent.end()) {
    return absl::InternalError(absl::StrCat("rank ", rank_, ": nothing to send for ", what));
  }
  if (it->second != peer) {
    return absl::InternalError(absl::StrCat("rank ", rank_, ": the schedule sends ", what,
                                            " to rank ", peer, ", but its consumer is rank ",
                                            it->second));
  }
  sent.erase(it);
  return absl::OkStatus();
}

absl::Status StageExecutor::Forward(int stage, int mb, int64_t step) {
  if (!batches_.count(mb))
    batches_[mb] = sampler_.Train(step, plan_.GlobalMicrobatch(replica_, mb));
  const TokenBatch& batch = batches_[mb];
  std::vector<float> input;
  if (stage > 0) {
    ASSIGN_OR_RETURN(input, TakeInput(&recv_fwd_, &local_fwd_, {stage, mb}, "recv F"));
  }
  const bool last = stage == plan_.schedule.num_stages - 1;
  std::vector<float> output;
  model::StageModel& m = *models_.at(stage);
  // The payload plus room for its stamp (sent or handed over on this rank unchanged). A
  // middle stage runs in its input's buffer and sends that on (as BackwardInput does).
  const float* x_in = input.data();
  if (!last) {
    const size_t size = static_cast<size_t>(m.StateElements(batch.batch)) + kStampFloats;
    output = input.size() == size ? std::move(input) : buffers_.Take(size);
  }
  const absl::Time t0 = absl::Now();
  ASSIGN_OR_RETURN(double loss, m.Forward(mb, batch.batch, batch.inputs.data(),
                                          batch.targets.data(), x_in, output.data()));
  AddSpan(Name("F", stage, mb), kCompute, t0, absl::Now(), mb);
  buffers_.Give(std::move(input));
  if (last) {
    outcome_->losses[plan_.GlobalMicrobatch(replica_, mb)] = loss;
  } else if (const int next = plan_.schedule.RankOf(stage + 1, mb); next == pipeline_rank_) {
    local_fwd_[{stage + 1, mb}] = std::move(output);
  } else {
    // Posted now, not at the schedule's SEND_F: in an overlapped F&B pair (run back to back
    // on CPU) that would hold the activation back for the whole backward half.
    RETURN_IF_ERROR(SendNow(true, stage, mb, plan_.WorldRank(replica_, next), std::move(output)));
  }
  return absl::OkStatus();
}

absl::Status StageExecutor::BackwardInput(int stage, int mb) {
  const bool last = stage == plan_.schedule.num_stages - 1;
  std::vector<float> grad, dx_in;
  if (!last) {
    ASSIGN_OR_RETURN(grad, TakeInput(&recv_bwd_, &local_bwd_, {stage, mb}, "recv B"));
  }
  model::StageModel& m = *models_.at(stage);
  // A middle stage computes its input gradient in the buffer of the gradient it received
  // (the same size: a micro-batch's state and its stamp; a moved vector keeps its storage, so
  // dx_out stays valid); the last stage takes a buffer for it.
  const float* dx_out = grad.data();
  if (stage > 0 && !last) {
    dx_in = std::move(grad);
  } else if (stage > 0) {
    dx_in = buffers_.Take(static_cast<size_t>(m.StateElements(config_.train.batch_size)) +
                          kStampFloats);
  }
  const absl::Time t0 = absl::Now();
  RETURN_IF_ERROR(m.BackwardInput(mb, 1.0 / config_.train.microbatches, dx_out, dx_in.data()));
  AddSpan(Name("I", stage, mb), kCompute, t0, absl::Now(), mb);
  buffers_.Give(std::move(grad));
  if (stage == 0) return absl::OkStatus();
  if (const int prev = plan_.schedule.RankOf(stage - 1, mb); prev == pipeline_rank_) {
    local_bwd_[{stage - 1, mb}] = std::move(dx_in);
  } else {
    // Posted before the weight gradient (a full B runs I then W): the upstream rank waits on
    // this gradient, not on W.
    RETURN_IF_ERROR(SendNow(false, stage, mb, plan_.WorldRank(replica_, prev), std::move(dx_in)));
  }
  return absl::OkStatus();
}

absl::Status StageExecutor::BackwardWeight(int stage, int mb, bool last) {
  const absl::Time t0 = absl::Now();
  if (last && mirrors_.count(stage) > 0) {
    RETURN_IF_ERROR(models_.at(stage)->BackwardWeight(
        mb, [this, stage](const std::vector<model::ParamT<float>*>& group) {
          return PostMirrorSends(stage, group);
        }));
  } else {
    RETURN_IF_ERROR(models_.at(stage)->BackwardWeight(mb));
  }
  AddSpan(Name("W", stage, mb), kCompute, t0, absl::Now(), mb);
  return absl::OkStatus();
}

}  // namespace xhc::worker
