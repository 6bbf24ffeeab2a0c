#include "runtime/worker/command_stream.h"

#include <chrono>

#include "runtime/worker/rpc_util.h"

namespace xhc::worker {

CommandStream::CommandStream(proto::Controller::Stub* stub, std::string token, int rank,
                             int64_t epoch)
    : stub_(stub), token_(std::move(token)), rank_(rank), epoch_(epoch) {}

absl::Status CommandStream::Open() {
  ctx_.AddMetadata("x-xhc-token", token_);
  stream_ = stub_->HeartbeatStream(&ctx_);
  proto::Heartbeat first;
  first.set_rank(rank_);
  first.set_epoch(epoch_);
  if (!stream_->Write(first)) {
    return FromGrpc(stream_->Finish(), "open heartbeat stream");
  }
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
  reader_ = std::thread([this] { ReadLoop(); });
  return absl::OkStatus();
}

void CommandStream::SetProgressSource(std::function<int64_t()> progress) {
  std::lock_guard<std::mutex> lock(mu_);
  progress_ = std::move(progress);
}

void CommandStream::SetCommandHook(std::function<void(const proto::Command&)> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  command_hook_ = std::move(hook);
}

void CommandStream::HeartbeatLoop() {
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    proto::Heartbeat beat;
    beat.set_rank(rank_);
    beat.set_epoch(epoch_);
    beat.set_step(step_.load());
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (progress_) beat.set_progress(progress_());
    }
    if (stop_.load() || !stream_->Write(beat)) break;
  }
}

void CommandStream::ReadLoop() {
  proto::Command cmd;
  while (stream_->Read(&cmd)) {
    std::function<void(const proto::Command&)> hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = command_hook_;
    }
    if (hook) hook(cmd);
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(cmd);
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  cv_.notify_all();
}

absl::StatusOr<proto::Command> CommandStream::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return closed_ || !queue_.empty(); });
  if (!queue_.empty()) {
    proto::Command cmd = queue_.front();
    queue_.pop_front();
    return cmd;
  }
  return absl::UnavailableError("lost the controller: heartbeat stream closed");
}

absl::Status CommandStream::Report(const proto::StepReport& report) {
  grpc::ClientContext ctx;
  PrepareContext(&ctx, token_, 60);
  proto::Empty resp;
  proto::StepReport stamped = report;
  stamped.set_epoch(epoch_);
  return FromGrpc(stub_->ReportStep(&ctx, stamped, &resp), "report to controller");
}

CommandStream::~CommandStream() {
  stop_ = true;
  if (stream_) ctx_.TryCancel();
  if (heartbeat_.joinable()) heartbeat_.join();
  if (reader_.joinable()) reader_.join();
}

}  // namespace xhc::worker
