// StageExecutor on a device: the rank's action list enqueued on streams instead of run
// (stage_executor.h, docs/design/device-streams.md).
//
// Streams: `compute` runs F, I and W; `compute_b` the backward half of an overlapped F&B pair,
// so the two halves may overlap where the device can run both at once; `copy` every transfer:
// posting a receive, waiting for it and checking its stamp, copying the state between the
// transport's host buffer and the device, and posting a send. The copy stream takes them in
// the order the CPU path blocks on them, so it is never more blocked than that path's thread.
// The ops of one stage are ordered across the compute streams by the event after the stage's
// latest op. The host enqueues the whole list, then waits once; the transport is used by the
// copy stream alone while the step runs, and by the host before the first enqueue and after
// the last wait.
//
// Every buffer an op touches stays alive until the step's end (the device's contract: in use
// until an event after it completes; the step's end is such an event for all of them).

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/worker/stage_executor.h"
#include "runtime/worker/stage_executor_device_lanes.h"

namespace xhc::worker {

using scheduler::Action;
using scheduler::ActionType;

namespace {

std::string OpName(const char* what, int stage, int mb) {
  return absl::StrCat(what, stage, ".", mb);
}

// Long enough for any step; a hung peer fails the copy stream's wait (timeout_) first, and a
// failed device ends every wait at once.
constexpr absl::Duration kStepSyncTimeout = absl::Hours(24);

}  // namespace

StageExecutor::~StageExecutor() = default;

absl::Status StageExecutor::RunActionsOnDevice(int64_t step) {
  if (lanes_ == nullptr) {
    auto lanes = std::make_unique<DeviceLanes>();
    ASSIGN_OR_RETURN(lanes->compute, device_->NewStream("compute"));
    ASSIGN_OR_RETURN(lanes->compute_b, device_->NewStream("compute-b"));
    ASSIGN_OR_RETURN(lanes->copy, device_->NewStream("copy"));
    ASSIGN_OR_RETURN(lanes->origin, device_->NewEvent("step origin"));
    lanes_ = std::move(lanes);
  }
  DeviceLanes& L = *lanes_;
  L.local_fwd.clear(), L.local_bwd.clear(), L.recv_fwd.clear(), L.recv_bwd.clear();
  L.stage_last.clear(), L.records.clear(), L.sends.clear(), L.retired.clear(), L.consumed.clear();
  L.losses.assign(config_.train.microbatches, 0.0);
  L.has_loss.assign(config_.train.microbatches, 0);
  RETURN_IF_ERROR(device_->RecordEvent(*L.origin, *L.compute));
  RETURN_IF_ERROR(device_->SynchronizeEvent(*L.origin, kStepSyncTimeout));
  L.origin_time = absl::Now();
  // Posted from this thread before anything is enqueued: the copy stream, which uses the
  // transport from here on, comes after them.
  RETURN_IF_ERROR(PostMirrorRecvs());
  RETURN_IF_ERROR(PostNormRecvs());
  const std::vector<Action>& actions = plan_.lowered[pipeline_rank_];
  for (size_t i = 0; i < actions.size(); ++i) {
    RETURN_IF_ERROR(EnqueueAction(actions[i], i, step));
    ++actions_done_;
  }
  return FinishDeviceStep();
}

absl::Status StageExecutor::EnqueueAction(const Action& a, size_t index, int64_t step) {
  const int peer =
      a.IsComm() || a.type == ActionType::kReduceGrad ? plan_.WorldRank(replica_, a.peer_rank) : -1;
  switch (a.type) {
    case ActionType::kForward: return EnqueueForward(a.stage_idx, a.microbatch_idx, step, false);
    case ActionType::kBackward:
      RETURN_IF_ERROR(EnqueueBackwardInput(a.stage_idx, a.microbatch_idx, false));
      return EnqueueBackwardWeight(a.stage_idx, a.microbatch_idx, false);
    case ActionType::kBackwardInput:
      return EnqueueBackwardInput(a.stage_idx, a.microbatch_idx, false);
    case ActionType::kBackwardWeight:
      return EnqueueBackwardWeight(a.stage_idx, a.microbatch_idx, false);
    case ActionType::kOverlapFB:
      // The halves on two streams: they overlap where the device runs both at once.
      RETURN_IF_ERROR(EnqueueForward(a.stage_idx, a.microbatch_idx, step, false));
      RETURN_IF_ERROR(EnqueueBackwardInput(a.bwd_stage_idx, a.bwd_microbatch_idx, true));
      return EnqueueBackwardWeight(a.bwd_stage_idx, a.bwd_microbatch_idx, true);
    case ActionType::kRecvF: return EnqueuePostRecv(true, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kRecvB: return EnqueuePostRecv(false, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kSendF: return PostSend(true, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kSendB: return PostSend(false, a.stage_idx, a.microbatch_idx, peer);
    case ActionType::kReduceGrad: return EnqueueMirror(a.stage_idx, peer);
  }
  return absl::InternalError("unknown action type");
}

absl::Status StageExecutor::EnqueuePostRecv(bool forward, int stage, int mb, int peer) {
  DeviceLanes& L = *lanes_;
  const uint64_t tag = forward ? MakeTag(TagKind::kForwardActivation, stage - 1, mb)
                               : MakeTag(TagKind::kBackwardGradient, stage, mb);
  auto r = std::make_shared<DeviceRecv>();
  r->elements = static_cast<size_t>(models_.at(stage)->StateElements(config_.train.batch_size));
  ASSIGN_OR_RETURN(r->staging, device_->Allocate((r->elements + kStampFloats) * sizeof(float),
                                                 device::MemoryKind::kHost));
  r->expected = {peer, forward ? stage - 1 : stage, mb, step_, 0};
  RETURN_IF_ERROR(device_->Launch(
      *L.copy, OpName(forward ? "post recv F" : "post recv B", stage, mb),
      [this, r, peer, tag]() -> absl::Status {
        ASSIGN_OR_RETURN(r->request, transport_->Irecv(peer, tag, r->staging.as<float>(),
                                                       r->elements + kStampFloats));
        return absl::OkStatus();
      }));
  (forward ? L.recv_fwd : L.recv_bwd)[{stage, mb}] = std::move(r);
  return absl::OkStatus();
}

absl::StatusOr<StageExecutor::DeviceState> StageExecutor::TakeDeviceInput(
    bool forward, int stage, int mb, device::Stream& stream, std::shared_ptr<DeviceRecv>* waited) {
  DeviceLanes& L = *lanes_;
  auto& recvs = forward ? L.recv_fwd : L.recv_bwd;
  auto& local = forward ? L.local_fwd : L.local_bwd;
  if (auto it = recvs.find({stage, mb}); it != recvs.end()) {
    std::shared_ptr<DeviceRecv> r = std::move(it->second);
    recvs.erase(it);
    L.consumed.push_back(r);
    const std::string name = OpName(forward ? "recv F" : "recv B", stage, mb);
    ASSIGN_OR_RETURN(std::shared_ptr<device::Event> start, device_->NewEvent(name));
    RETURN_IF_ERROR(device_->RecordEvent(*start, *L.copy));
    RETURN_IF_ERROR(device_->Launch(*L.copy, name, [this, r, name]() -> absl::Status {
      RETURN_IF_ERROR(r->request->Wait(timeout_));
      ASSIGN_OR_RETURN(const PayloadStamp stamp,
                       ReadStamp(r->staging.as<float>(), r->elements, r->expected,
                                 absl::StrCat("rank ", rank_, ": ", name)));
      r->send_unix_us = stamp.send_unix_us;
      return absl::OkStatus();
    }));
    DeviceState state;
    ASSIGN_OR_RETURN(device::DeviceBuffer buffer,
                     device_->Allocate(r->elements * sizeof(float), device::MemoryKind::kDevice));
    if (drop_input_wait_for_test_) {
      // What a read before the copy lands sees, made unmistakable (the host device's memory
      // is the host's; this mode exists for it alone).
      std::fill_n(buffer.as<float>(), r->elements, std::numeric_limits<float>::quiet_NaN());
    }
    state.buffer = std::make_shared<device::DeviceBuffer>(std::move(buffer));
    RETURN_IF_ERROR(
        device_->CopyAsync(*L.copy, *state.buffer, r->staging, r->elements * sizeof(float)));
    ASSIGN_OR_RETURN(state.ready, device_->NewEvent(name + " ready"));
    RETURN_IF_ERROR(device_->RecordEvent(*state.ready, *L.copy));
    L.records.push_back({name, kTransfer, L.copy.get(), start, state.ready, nullptr});
    if (!drop_input_wait_for_test_) RETURN_IF_ERROR(device_->WaitEvent(stream, *state.ready));
    *waited = std::move(r);
    return state;
  }
  if (auto it = local.find({stage, mb}); it != local.end()) {
    DeviceState state = std::move(it->second);
    local.erase(it);
    RETURN_IF_ERROR(device_->WaitEvent(stream, *state.ready));
    return state;
  }
  return absl::InternalError(absl::StrCat("rank ", rank_, ": ",
                                          OpName(forward ? "recv F" : "recv B", stage, mb),
                                          " has no input (neither received nor produced here)"));
}

absl::Status StageExecutor::EnqueueCompute(device::Stream& stream, int stage, int mb,
                                           const std::string& name,
                                           std::shared_ptr<DeviceRecv> waited,
                                           std::function<absl::Status()> op) {
  DeviceLanes& L = *lanes_;
  if (auto it = L.stage_last.find(stage); it != L.stage_last.end()) {
    RETURN_IF_ERROR(device_->WaitEvent(stream, *it->second));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<device::Event> start, device_->NewEvent(name));
  ASSIGN_OR_RETURN(std::shared_ptr<device::Event> end, device_->NewEvent(name + " end"));
  RETURN_IF_ERROR(device_->RecordEvent(*start, stream));
  RETURN_IF_ERROR(device_->Launch(stream, name, std::move(op)));
  RETURN_IF_ERROR(device_->RecordEvent(*end, stream));
  L.stage_last[stage] = end;
  L.records.push_back(
      {name, kCompute, &stream, std::move(start), std::move(end), std::move(waited), mb});
  return absl::OkStatus();
}

absl::Status StageExecutor::EnqueueForward(int stage, int mb, int64_t step, bool second_stream) {
  DeviceLanes& L = *lanes_;
  device::Stream& stream = second_stream ? *L.compute_b : *L.compute;
  if (!batches_.count(mb)) {
    batches_[mb] = sampler_.Train(step, plan_.GlobalMicrobatch(replica_, mb));
  }
  const TokenBatch* batch = &batches_.at(mb);  // map nodes stay put until the step's end
  const bool last = stage == plan_.schedule.num_stages - 1;
  model::StageModel* m = models_.at(stage).get();
  DeviceState in, out;
  std::shared_ptr<DeviceRecv> waited;
  if (stage > 0) {
    ASSIGN_OR_RETURN(in, TakeDeviceInput(true, stage, mb, stream, &waited));
  }
  if (!last && in.buffer != nullptr) {
    out.buffer = in.buffer;  // a middle stage runs in its input's buffer (as the CPU path)
  } else if (!last) {
    ASSIGN_OR_RETURN(
        device::DeviceBuffer b,
        device_->Allocate(static_cast<size_t>(m->StateElements(batch->batch)) * sizeof(float),
                          device::MemoryKind::kDevice));
    out.buffer = std::make_shared<device::DeviceBuffer>(std::move(b));
  }
  const float* x_in = in.buffer ? in.buffer->as<float>() : nullptr;
  float* x_out = out.buffer ? out.buffer->as<float>() : nullptr;
  double* loss = &L.losses.at(mb);
  char* has_loss = &L.has_loss.at(mb);
  RETURN_IF_ERROR(EnqueueCompute(
      stream, stage, mb, OpName("F", stage, mb), std::move(waited),
      [m, mb, batch, x_in, x_out, loss, has_loss, last]() -> absl::Status {
        ASSIGN_OR_RETURN(const double l, m->Forward(mb, batch->batch, batch->inputs.data(),
                                                    batch->targets.data(), x_in, x_out));
        if (last) *loss = l, *has_loss = 1;
        return absl::OkStatus();
      }));
  if (in.buffer != nullptr) L.retired.push_back(in);
  if (last) return absl::OkStatus();
  out.ready = L.stage_last.at(stage);
  if (const int next = plan_.schedule.RankOf(stage + 1, mb); next == pipeline_rank_) {
    L.local_fwd[{stage + 1, mb}] = std::move(out);
    return absl::OkStatus();
  } else {
    return EnqueueSend(true, stage, mb, plan_.WorldRank(replica_, next), std::move(out));
  }
}

absl::Status StageExecutor::EnqueueBackwardInput(int stage, int mb, bool second_stream) {
  DeviceLanes& L = *lanes_;
  device::Stream& stream = second_stream ? *L.compute_b : *L.compute;
  const bool last = stage == plan_.schedule.num_stages - 1;
  model::StageModel* m = models_.at(stage).get();
  DeviceState grad, dx;
  std::shared_ptr<DeviceRecv> waited;
  if (!last) {
    ASSIGN_OR_RETURN(grad, TakeDeviceInput(false, stage, mb, stream, &waited));
  }
  if (stage > 0 && !last) {
    dx.buffer = grad.buffer;  // computed in the received gradient's buffer (as the CPU path)
  } else if (stage > 0) {
    ASSIGN_OR_RETURN(
        device::DeviceBuffer b,
        device_->Allocate(
            static_cast<size_t>(m->StateElements(config_.train.batch_size)) * sizeof(float),
            device::MemoryKind::kDevice));
    dx.buffer = std::make_shared<device::DeviceBuffer>(std::move(b));
  }
  const float* dx_out = grad.buffer ? grad.buffer->as<float>() : nullptr;
  float* dx_in = dx.buffer ? dx.buffer->as<float>() : nullptr;
  const double scale = 1.0 / config_.train.microbatches;
  RETURN_IF_ERROR(EnqueueCompute(
      stream, stage, mb, OpName("I", stage, mb), std::move(waited),
      [m, mb, scale, dx_out, dx_in] { return m->BackwardInput(mb, scale, dx_out, dx_in); }));
  if (grad.buffer != nullptr) L.retired.push_back(grad);
  if (stage == 0) return absl::OkStatus();
  dx.ready = L.stage_last.at(stage);
  if (const int prev = plan_.schedule.RankOf(stage - 1, mb); prev == pipeline_rank_) {
    L.local_bwd[{stage - 1, mb}] = std::move(dx);
    return absl::OkStatus();
  } else {
    return EnqueueSend(false, stage, mb, plan_.WorldRank(replica_, prev), std::move(dx));
  }
}

absl::Status StageExecutor::EnqueueBackwardWeight(int stage, int mb, bool second_stream) {
  // Without the per-group hand-over of the CPU path's last weight pass: DualPipe's mirror sums
  // leave at REDUCE_GRAD (EnqueueMirror), from the copy stream.
  device::Stream& stream = second_stream ? *lanes_->compute_b : *lanes_->compute;
  model::StageModel* m = models_.at(stage).get();
  return EnqueueCompute(stream, stage, mb, OpName("W", stage, mb), nullptr,
                        [m, mb] { return m->BackwardWeight(mb); });
}

absl::Status StageExecutor::EnqueueSend(bool forward, int stage, int mb, int peer,
                                        DeviceState state) {
  DeviceLanes& L = *lanes_;
  const uint64_t tag = forward ? MakeTag(TagKind::kForwardActivation, stage, mb)
                               : MakeTag(TagKind::kBackwardGradient, stage - 1, mb);
  const int boundary = forward ? stage : stage - 1;
  const size_t elements = state.buffer->bytes() / sizeof(float);
  auto send = std::make_shared<DeviceLanes::Send>();
  ASSIGN_OR_RETURN(send->staging, device_->Allocate((elements + kStampFloats) * sizeof(float),
                                                    device::MemoryKind::kHost));
  const std::string name = OpName(forward ? "send F" : "send B", stage, mb);
  RETURN_IF_ERROR(device_->WaitEvent(*L.copy, *state.ready));
  ASSIGN_OR_RETURN(std::shared_ptr<device::Event> start, device_->NewEvent(name));
  ASSIGN_OR_RETURN(std::shared_ptr<device::Event> end, device_->NewEvent(name + " end"));
  RETURN_IF_ERROR(device_->RecordEvent(*start, *L.copy));
  RETURN_IF_ERROR(
      device_->CopyAsync(*L.copy, send->staging, *state.buffer, elements * sizeof(float)));
  RETURN_IF_ERROR(device_->Launch(
      *L.copy, name, [this, send, peer, tag, boundary, mb, elements]() -> absl::Status {
        WriteStamp({rank_, boundary, mb, step_, absl::ToUnixMicros(absl::Now())},
                   send->staging.as<float>(), elements);
        ASSIGN_OR_RETURN(send->request, transport_->Isend(peer, tag, send->staging.as<float>(),
                                                          elements + kStampFloats));
        return absl::OkStatus();
      }));
  RETURN_IF_ERROR(device_->RecordEvent(*end, *L.copy));
  L.records.push_back({name, kTransfer, L.copy.get(), std::move(start), std::move(end), nullptr});
  L.sends.push_back(std::move(send));
  L.retired.push_back(std::move(state));
  (forward ? sent_fwd_ : sent_bwd_)[{stage, mb}] = peer;
  return absl::OkStatus();
}

absl::Status StageExecutor::EnqueueMirror(int stage, int peer) {
  DeviceLanes& L = *lanes_;
  if (auto it = L.stage_last.find(stage); it != L.stage_last.end()) {
    RETURN_IF_ERROR(device_->WaitEvent(*L.copy, *it->second));
  }
  return device_->Launch(*L.copy, absl::StrCat("reduce grad ", stage),
                         [this, stage, peer] { return PostMirror(stage, peer); });
}

absl::Status StageExecutor::FinishDeviceStep() {
  DeviceLanes& L = *lanes_;
  // Every stream drained (a failed op fails the device and ends these at once), then the
  // device's health: the first failure of any op is the step's.
  absl::Status status = device_->SynchronizeStream(*L.copy, kStepSyncTimeout);
  for (device::Stream* s : {L.compute.get(), L.compute_b.get()}) {
    const absl::Status st = device_->SynchronizeStream(*s, kStepSyncTimeout);
    if (status.ok()) status = st;
  }
  RETURN_IF_ERROR(status);
  for (int mb = 0; mb < static_cast<int>(L.losses.size()); ++mb) {
    if (L.has_loss[mb]) outcome_->losses[plan_.GlobalMicrobatch(replica_, mb)] = L.losses[mb];
  }
  // Spans from the events. A compute op that waited for a received input: the time its stream
  // stood still before it (from its previous op's end) is that wait, split at the sender's
  // stamp into waiting on the peer and exposed communication, as on the CPU path.
  std::map<const device::Stream*, absl::Time> stream_end;
  auto at = [&](device::Event& e) -> absl::StatusOr<absl::Time> {
    ASSIGN_OR_RETURN(const double s, device_->ElapsedSeconds(*L.origin, e));
    return L.origin_time + absl::Seconds(s);
  };
  for (const DeviceLanes::Record& r : L.records) {
    ASSIGN_OR_RETURN(const absl::Time start, at(*r.start));
    ASSIGN_OR_RETURN(const absl::Time end, at(*r.end));
    auto [it, fresh] = stream_end.try_emplace(r.stream, L.origin_time);
    if (r.waited != nullptr && start > it->second) {
      AddWaitSpans(absl::StrCat("wait ", r.name), it->second, start,
                   absl::FromUnixMicros(r.waited->send_unix_us));
    }
    it->second = std::max(it->second, end);
    AddSpan(r.name, r.track, start, end, r.mb);
  }
  // The copy stream posted every send; the step ends with them delivered, as on the CPU path.
  const absl::Time d0 = absl::Now();
  for (const auto& send : L.sends) {
    if (send->request == nullptr) return absl::InternalError("a send was never posted");
    RETURN_IF_ERROR(send->request->Wait(timeout_));
  }
  if (!L.sends.empty()) AddSpan("drain sends", kComm, d0, absl::Now());
  // Data parallelism: each stage's exchange across replicas, in the order its gradients were
  // completed (after the whole list here: the device path does not yet overlap them).
  for (const auto& [index, stages] : grads_done_after_) {
    for (int s : stages) {
      RETURN_IF_ERROR(FinishMirror(s));
      RETURN_IF_ERROR(reducer_->Launch(s, params_.at(s).get()));
    }
  }
  L.sends.clear(), L.retired.clear(), L.consumed.clear(), L.records.clear();
  return absl::OkStatus();
}

}  // namespace xhc::worker
