#ifndef XHC_RUNTIME_WORKER_COMMAND_STREAM_H_
#define XHC_RUNTIME_WORKER_COMMAND_STREAM_H_

// The worker's side of the heartbeat stream: a heartbeat thread writes a beat every 200 ms
// (carrying a progress counter, so a hung worker is told apart from a slow one), a reader
// thread queues the controller's commands. If the stream breaks, Next() reports the
// controller as lost instead of blocking forever.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "proto/xhc.grpc.pb.h"

namespace xhc::worker {

class CommandStream {
 public:
  // `epoch`: RegisterResponse.epoch, carried by every beat and report so the controller can
  // tell this registration from a later one for the same rank.
  CommandStream(proto::Controller::Stub* stub, std::string token, int rank, int64_t epoch);
  ~CommandStream();

  absl::Status Open();
  // Blocks for the next command; kUnavailable once the controller is gone.
  absl::StatusOr<proto::Command> Next();
  // Sends a step/checkpoint report (unary RPC), stamped with this registration's epoch.
  absl::Status Report(const proto::StepReport& report);
  void SetProgressSource(std::function<int64_t()> progress);
  // Called on the reader thread for every command as soon as it arrives (before it is
  // queued): lets an ABORT interrupt a step or a rendezvous that is blocked right now.
  void SetCommandHook(std::function<void(const proto::Command&)> hook);
  void SetStep(int64_t step) { step_ = step; }

 private:
  void HeartbeatLoop();
  void ReadLoop();

  proto::Controller::Stub* stub_;
  std::string token_;
  int rank_;
  int64_t epoch_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<proto::Heartbeat, proto::Command>> stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<proto::Command> queue_;
  bool closed_ = false;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> step_{0};
  std::function<int64_t()> progress_;
  std::function<void(const proto::Command&)> command_hook_;
  std::thread heartbeat_, reader_;
};

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_COMMAND_STREAM_H_
