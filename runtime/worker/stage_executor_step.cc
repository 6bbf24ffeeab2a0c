// StageExecutor: the action loop, mirror-gradient sums, gradient norm, optimizer, evaluation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kernels/cpu/nn/adamw.h"
#include "runtime/train/optimizer.h"
#include "runtime/worker/stage_executor.h"

namespace xhc::worker {

using scheduler::Action;
using scheduler::ActionType;

absl::Status StageExecutor::Execute(const Action& a, size_t index, int64_t step) {
  // The schedule names pipeline ranks; this replica's copy of pipeline rank p is world rank
  // WorldRank(replica_, p).
  const int peer =
      a.IsComm() || a.type == ActionType::kReduceGrad ? plan_.WorldRank(replica_, a.peer_rank) : -1;
  const bool last_w = last_weight_pass_.count(index) > 0;
  switch (a.type) {
    case ActionType::kForward: return Forward(a.stage_idx, a.microbatch_idx, step);
    case ActionType::kBackward:
      RETURN_IF_ERROR(BackwardInput(a.stage_idx, a.microbatch_idx));
      return BackwardWeight(a.stage_idx, a.microbatch_idx, last_w);
    case ActionType::kBackwardInput: return BackwardInput(a.stage_idx, a.microbatch_idx);
    case ActionType::kBackwardWeight: return BackwardWeight(a.stage_idx, a.microbatch_idx, last_w);
    case ActionType::kOverlapFB:
      // On CPU both halves share the cores, so they run back to back; what overlaps is
      // their communication, which is in flight (posted sends/receives) throughout.
      RETURN_IF_ERROR(Forward(a.stage_idx, a.microbatch_idx, step));
      RETURN_IF_ERROR(BackwardInput(a.bwd_stage_idx, a.bwd_microbatch_idx));
      return BackwardWeight(a.bwd_stage_idx, a.bwd_microbatch_idx, last_w);
    case ActionType::kRecvF: return PostRecv(true, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kRecvB: return PostRecv(false, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kSendF: return PostSend(true, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kSendB: return PostSend(false, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kReduceGrad: return PostMirror(a.stage_idx, peer);
  }
  return absl::InternalError("unknown action type");
}

absl::Status StageExecutor::PostMirrorRecvs() {
  // Both replicas of a DualPipe stage exchange their gradients and add the other's (IEEE
  // addition is commutative, so both copies end bit-identical and stay so after AdamW). The
  // receives are posted when the step starts: gloo moves a message only once its receive is
  // posted, and posted at REDUCE_GRAD they put the whole transfer of the replica's sums (sent
  // long before when it finished first) behind this rank's last weight pass
  // (docs/design/dualpipe-mirror-exchange.md).
  for (auto& [stage, m] : mirrors_) {
    const auto& params = params_.at(stage)->all();
    m.theirs.resize(params.size());
    m.sends.resize(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      m.theirs[i].resize(params[i]->grad_acc.size());
      const uint64_t tag = MakeTag(TagKind::kMirrorGradient, stage, static_cast<int>(i));
      ASSIGN_OR_RETURN(auto recv,
                       transport_->Irecv(m.peer, tag, reinterpret_cast<float*>(m.theirs[i].data()),
                                         2 * m.theirs[i].size()));
      m.recvs.push_back(std::move(recv));
    }
  }
  return absl::OkStatus();
}

absl::Status StageExecutor::PostMirrorSends(int stage,
                                            const std::vector<model::ParamT<float>*>& group) {
  // One message per parameter (tag: its index), its double sums as raw bytes (two float
  // slots per double) straight from grad_acc, which nothing changes until FinishMirror: a
  // copy of the stage's 10 MB into one buffer took the compute thread 11.6 ms
  // (docs/design/dualpipe-mirror-exchange.md).
  MirrorExchange& m = mirrors_.at(stage);
  for (model::ParamT<float>* param : group) {
    const int i = m.index.at(param);
    if (static_cast<size_t>(i) >= m.sends.size()) {
      return absl::InternalError(absl::StrCat("stage ", stage, ": mirror sums of ", param->name,
                                              " sent outside the step's exchange"));
    }
    if (m.sends[i] != nullptr) {
      return absl::InternalError(
          absl::StrCat("stage ", stage, ": mirror sums of ", param->name, " sent twice"));
    }
    const uint64_t tag = MakeTag(TagKind::kMirrorGradient, stage, i);
    ASSIGN_OR_RETURN(
        m.sends[i], transport_->Isend(m.peer, tag, reinterpret_cast<float*>(param->grad_acc.data()),
                                      2 * param->grad_acc.size()));
  }
  return absl::OkStatus();
}

absl::Status StageExecutor::PostMirror(int stage, int peer) {
  // At REDUCE_GRAD, after this rank's last contribution to the stage: the sums its last
  // weight pass has not sent already (all of them when no weight pass of the stage ran this
  // step). The two replicas may post in different orders, which non-blocking posts allow.
  auto it = mirrors_.find(stage);
  if (it == mirrors_.end() || it->second.peer != peer) {
    return absl::InternalError(absl::StrCat("stage ", stage, ": REDUCE_GRAD with peer ", peer,
                                            " outside the plan's mirror pairs"));
  }
  MirrorExchange& m = it->second;
  if (m.reduce_grad_ran) {
    return absl::InternalError(absl::StrCat("stage ", stage, ": a second REDUCE_GRAD in a step"));
  }
  m.reduce_grad_ran = true;
  model::ParamSetT<float>& ps = *params_.at(stage);
  ps.MaterializeSums();
  std::vector<model::ParamT<float>*> unsent;
  for (size_t i = 0; i < ps.all().size(); ++i) {
    if (m.sends[i] == nullptr) unsent.push_back(ps.all()[i].get());
  }
  return PostMirrorSends(stage, unsent);
}

absl::Status StageExecutor::FinishMirror(int stage) {
  auto it = mirrors_.find(stage);
  if (it == mirrors_.end() || it->second.recvs.empty()) return absl::OkStatus();
  MirrorExchange& m = it->second;
  if (!m.reduce_grad_ran) {
    return absl::InternalError(
        absl::StrCat("stage ", stage, ": mirror gradients needed before its REDUCE_GRAD ran"));
  }
  // The span is the wait at the finish (what the exchange still costs the step), not the
  // time since it was posted.
  const absl::Time t0 = absl::Now();
  for (const auto& r : m.recvs) RETURN_IF_ERROR(r->Wait(timeout_));
  for (const auto& r : m.sends) RETURN_IF_ERROR(r->Wait(timeout_));
  AddSpan(absl::StrCat("reduce grad ", stage), 1, t0, absl::Now());
  m.recvs.clear();
  m.sends.clear();
  const auto& params = params_.at(stage)->all();
  for (size_t i = 0; i < params.size(); ++i) {
    const double* theirs = m.theirs[i].data();
    std::vector<double>& acc = params[i]->grad_acc;
    for (size_t e = 0; e < acc.size(); ++e) acc[e] += theirs[e];
  }
  return absl::OkStatus();
}

absl::Status StageExecutor::FinishMirrors() {
  for (auto& [stage, m] : mirrors_) RETURN_IF_ERROR(FinishMirror(stage));
  return absl::OkStatus();
}

// A direct exchange sends world - 1 messages per rank; past a handful of ranks the
// all-reduce's rounds cost less.
constexpr int kDirectNormRanks = 8;

bool StageExecutor::DirectNorm() const {
  return transport_->world_size() > 1 && transport_->world_size() <= kDirectNormRanks;
}

absl::Status StageExecutor::PostNormRecvs() {
  // Posted when the step starts, as the mirror receives are: gloo's tcp pair moves a message
  // once its receive is posted, and a receive posted at the end would add a round trip (the
  // receiver's notice, then the data) to every rank's wait for the slowest.
  norm_recvs_.clear();
  if (!DirectNorm()) return absl::OkStatus();
  const int world = transport_->world_size();
  norm_slots_.resize(world);
  norm_recvs_.resize(world);
  for (int p = 0; p < world; ++p) {
    if (p == rank_) continue;
    ASSIGN_OR_RETURN(norm_recvs_[p],
                     transport_->Irecv(p, MakeTag(TagKind::kGradNorm, 0, 0),
                                       reinterpret_cast<float*>(norm_slots_[p].data()), 4));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> StageExecutor::AllReduceGradNorm(double local_sum_of_squares) {
  // Every rank's pair: when it arrived, so the wait for the slowest counts as waiting on peers, and
  // its sum of squares, added below in rank order on every rank, so all get the same bits whatever
  // order the messages (or a reduction) took. Up to kDirectNormRanks ranks the pairs go straight to
  // every other rank, one message each way into receives posted when the step started: one hop,
  // where gloo's all-reduce takes two rounds of a notice and the data
  // (docs/design/pipeline-wait-accounting.md). Larger worlds: one all-reduce of two slots per rank,
  // each written by its rank alone (the others add 0, so every slot arrives exact).
  const absl::Time t0 = absl::Now();
  const size_t world = static_cast<size_t>(transport_->world_size());
  const size_t me = static_cast<size_t>(rank_);
  std::vector<double> arrived(world, 0.0), sums(world, 0.0);
  arrived[me] = static_cast<double>(absl::ToUnixMicros(t0));
  sums[me] = local_sum_of_squares;
  if (DirectNorm()) {
    if (norm_recvs_.size() != world) {
      return absl::InternalError("gradient norm: the step's receives were not posted");
    }
    norm_slots_[me] = {arrived[me], sums[me]};
    std::vector<std::unique_ptr<Request>> sends;
    for (size_t p = 0; p < world; ++p) {
      if (p == me) continue;
      ASSIGN_OR_RETURN(auto send,
                       transport_->Isend(static_cast<int>(p), MakeTag(TagKind::kGradNorm, 0, 0),
                                         reinterpret_cast<float*>(norm_slots_[me].data()), 4));
      sends.push_back(std::move(send));
    }
    for (size_t p = 0; p < world; ++p) {
      if (p == me) continue;
      RETURN_IF_ERROR(norm_recvs_[p]->Wait(timeout_));
      arrived[p] = norm_slots_[p][0];
      sums[p] = norm_slots_[p][1];
    }
    for (const auto& s : sends) RETURN_IF_ERROR(s->Wait(timeout_));
    norm_recvs_.clear();
  } else if (world > 1) {
    std::vector<double> slots(2 * world, 0.0);
    slots[me] = arrived[me];
    slots[world + me] = sums[me];
    RETURN_IF_ERROR(transport_->AllReduceSum(slots.data(), slots.size(), timeout_));
    for (size_t r = 0; r < world; ++r) {
      arrived[r] = slots[r];
      sums[r] = slots[world + r];
    }
  }
  double last = 0, sq = 0;
  for (size_t r = 0; r < world; ++r) {
    last = std::max(last, arrived[r]);
    sq += sums[r];
  }
  AddWaitSpans("all-reduce grad norm", t0, absl::Now(),
               absl::FromUnixMicros(static_cast<int64_t>(last)));
  return std::sqrt(sq);
}

absl::Status StageExecutor::ReduceAcrossReplicas() {
  if (reducer_ == nullptr) return absl::OkStatus();
  const absl::Time t0 = absl::Now();
  absl::Duration waited;
  RETURN_IF_ERROR(reducer_->Finish(&waited));
  AddSpan("replica grad wait", 1, t0, t0 + waited);
  outcome_->replica_reduce_wait_s += absl::ToDoubleSeconds(waited);
  return absl::OkStatus();
}

absl::Status StageExecutor::FinishSends() {
  const absl::Time t0 = absl::Now();
  for (auto& [request, buffer] : sends_) RETURN_IF_ERROR(request->Wait(timeout_));
  if (!sends_.empty()) AddSpan("drain sends", 1, t0, absl::Now());
  for (auto& [request, buffer] : sends_) buffers_.Give(std::move(buffer));
  sends_.clear();
  return absl::OkStatus();
}

double StageExecutor::LocalGradSumOfSquares() const {
  double total = 0;
  for (const auto& [s, ps] : params_) {
    if (IsCanonical(s)) total += train::GradSumOfSquares(*ps);
  }
  return total;
}

// A step starts from zero gradients and no traffic: what a failed step left is dropped (a
// Request destroyed before its Wait returned fails the transport, which a failed step has
// done anyway; the receive buffers stay).
void StageExecutor::ResetForStep(int64_t step) {
  step_ = step;
  for (auto& [s, ps] : params_) ps->ZeroGrads();
  batches_.clear();
  sent_fwd_.clear();
  sent_bwd_.clear();
  for (auto& [stage, m] : mirrors_) {
    m.recvs.clear();
    m.sends.clear();
    m.reduce_grad_ran = false;
  }
}

// The rank's action list in order; after the action that completes a stage's gradients, that
// stage's mirror sums and its exchange across replicas start.
absl::Status StageExecutor::RunActions(int64_t step) {
  RETURN_IF_ERROR(PostMirrorRecvs());
  RETURN_IF_ERROR(PostNormRecvs());
  const std::vector<Action>& actions = plan_.lowered[pipeline_rank_];
  for (size_t i = 0; i < actions.size(); ++i) {
    RETURN_IF_ERROR(Execute(actions[i], i, step));
    ++actions_done_;
    auto it = grads_done_after_.find(i);
    if (it == grads_done_after_.end()) continue;
    for (int s : it->second) {
      RETURN_IF_ERROR(FinishMirror(s));  // a replica exchange takes the mirror-summed gradients
      RETURN_IF_ERROR(reducer_->Launch(s, params_.at(s).get()));
      // Measurement only (docs/data-parallelism.md): the exchange's full cost, unhidden.
      if (blocking_replica_reduce_) RETURN_IF_ERROR(ReduceAcrossReplicas());
    }
  }
  return absl::OkStatus();
}

// Every output sent, every mirror sum and replica exchange complete: the step's gradients
// are final on this rank.
absl::Status StageExecutor::FinishStepTraffic() {
  if (!(sent_fwd_.empty() && sent_bwd_.empty())) {
    return absl::InternalError(absl::StrCat(
        "rank ", rank_, ": ", sent_fwd_.size() + sent_bwd_.size(),
        " output(s) went to other ranks without a SEND action in this rank's schedule"));
  }
  RETURN_IF_ERROR(FinishMirrors());
  RETURN_IF_ERROR(FinishSends());
  return ReduceAcrossReplicas();
}

// The global gradient norm, then AdamW on every stage this rank holds.
absl::Status StageExecutor::ApplyUpdate(int64_t step, int64_t total_steps, StepOutcome* out) {
  for (auto& [s, ps] : params_) ps->FinalizeGrads();
  ASSIGN_OR_RETURN(out->grad_norm, AllReduceGradNorm(LocalGradSumOfSquares()));
  const absl::Time o0 = absl::Now();
  for (auto& [s, ps] : params_) {
    train::ApplyAdamW(config_.optim, total_steps, step, out->grad_norm, ps.get());
  }
  AddSpan("optimizer", 0, o0, absl::Now());
  return absl::OkStatus();
}

absl::StatusOr<StepOutcome> StageExecutor::RunStep(int64_t step, int64_t total_steps,
                                                   bool evaluate) {
  StepOutcome out;
  outcome_ = &out;
  const absl::Time t0 = absl::Now();
  ResetForStep(step);
  absl::Status status = device_ != nullptr ? RunActionsOnDevice(step) : RunActions(step);
  if (status.ok()) status = FinishStepTraffic();
  if (status.ok()) status = ApplyUpdate(step, total_steps, &out);
  // Every replica holds the same weights: replica 0 alone runs the validation batches.
  if (status.ok() && evaluate && replica_ == 0) status = Evaluate(&out);
  outcome_ = nullptr;
  if (!status.ok()) return status;
  out.step_s = absl::ToDoubleSeconds(absl::Now() - t0);
  return out;
}

absl::Status StageExecutor::Evaluate(StepOutcome* out) {
  // Validation: each eval batch flows through the canonical holder of every stage in order
  // (forward only, blocking); micro-batch ids past the training ones keep tags distinct.
  const int num_stages = plan_.schedule.num_stages, M = config_.train.microbatches;
  for (int e = 0; e < config_.train.eval_batches; ++e) {
    const TokenBatch batch = val_sampler_->Eval(e);
    std::vector<float> state;
    int holder_prev = -1;
    for (int s = 0; s < num_stages; ++s) {
      const int holder = plan_.WorldRank(0, plan_.schedule.StageToRanks(s).front());
      const uint64_t tag = MakeTag(TagKind::kForwardActivation, s - 1 < 0 ? 0 : s - 1, M + e);
      if (holder != rank_) {
        if (holder_prev == rank_) {
          ASSIGN_OR_RETURN(auto send, transport_->Isend(holder, tag, state.data(), state.size()));
          RETURN_IF_ERROR(send->Wait(timeout_));
        }
        holder_prev = holder;
        continue;
      }
      model::StageModel& m = *models_.at(s);
      if (s > 0 && holder_prev != rank_) {
        state.resize(static_cast<size_t>(m.StateElements(batch.batch)));
        ASSIGN_OR_RETURN(auto recv,
                         transport_->Irecv(holder_prev, tag, state.data(), state.size()));
        RETURN_IF_ERROR(recv->Wait(timeout_));
      }
      std::vector<float> next(s + 1 < num_stages ? m.StateElements(batch.batch) : 0);
      ASSIGN_OR_RETURN(double loss,
                       m.ForwardOnly(batch.batch, batch.inputs.data(), batch.targets.data(),
                                     state.data(), next.data(), nullptr));
      if (s + 1 == num_stages) out->val_losses.push_back(loss);
      state = std::move(next);
      holder_prev = holder;
    }
  }
  return absl::OkStatus();
}

}  // namespace xhc::worker
