#include "runtime/control/controller/controller_handlers.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace xhc::controller {

ControllerHandlers::ControllerHandlers(Controller* controller, std::string token,
                                       double command_poll_s)
    : controller_(controller), token_(std::move(token)), command_poll_s_(command_poll_s) {}

absl::Status ControllerHandlers::Authenticate(const CallInfo& call) {
  if (call.token && *call.token == token_) return absl::OkStatus();
  const std::string host = PeerHost(call.peer);
  if (!bad_token_limiter_.Allow(host)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("too many requests with a missing or wrong job token from ", host,
                     " (more than ", kBadTokenRate, " a second): refused unread"));
  }
  return absl::UnauthenticatedError(call.token ? "wrong job token" : "missing job token");
}

absl::Status ControllerHandlers::Register(const CallInfo& call, const proto::RegisterRequest& req,
                                          proto::RegisterResponse* resp) {
  if (absl::Status a = Authenticate(call); !a.ok()) return a;
  absl::StatusOr<proto::RegisterResponse> r = controller_->Register(req);
  if (!r.ok()) return r.status();
  *resp = *std::move(r);
  return absl::OkStatus();
}

absl::Status ControllerHandlers::KvSet(const CallInfo& call, const proto::KvSetRequest& req) {
  if (absl::Status a = Authenticate(call); !a.ok()) return a;
  controller_->KvSet(req.key(), req.value());
  return absl::OkStatus();
}

absl::Status ControllerHandlers::KvGet(const CallInfo& call, const proto::KvGetRequest& req,
                                       proto::KvGetResponse* resp) {
  if (absl::Status a = Authenticate(call); !a.ok()) return a;
  // In milliseconds as an integer first: a timeout_ms near 2^63 must not reach the
  // floating-point deadline arithmetic.
  const int64_t ms =
      std::clamp<int64_t>(req.timeout_ms(), 0, static_cast<int64_t>(kMaxKvWaitS * 1000));
  absl::StatusOr<std::vector<std::string>> v =
      controller_->KvGet({req.keys().begin(), req.keys().end()}, static_cast<double>(ms) / 1000);
  if (!v.ok()) return v.status();
  for (const std::string& s : *v) resp->add_values(s);
  return absl::OkStatus();
}

absl::Status ControllerHandlers::HeartbeatStream(const CallInfo& call, HeartbeatIo* io) {
  if (absl::Status a = Authenticate(call); !a.ok()) return a;
  proto::Heartbeat first;
  if (!io->Read(&first))
    return absl::CancelledError("heartbeat stream ended before its first beat");
  const int rank = first.rank();
  const int64_t epoch = first.epoch();
  if (absl::Status s = controller_->Attach(rank, epoch); !s.ok()) return s;
  controller_->Heartbeat(rank, first, epoch);
  std::atomic<bool> done{false};
  // Commands go out on a second thread: gRPC allows one reader and one writer at a time.
  std::thread writer([&] {
    while (!done.load()) {
      bool stale = false;
      std::optional<proto::Command> cmd =
          controller_->NextCommand(rank, epoch, command_poll_s_, &stale);
      if (stale) {
        io->Cancel();  // replaced: close this worker's stream
        break;
      }
      if (cmd && !io->Write(*cmd)) break;
    }
  });
  proto::Heartbeat beat;
  absl::Status status = absl::OkStatus();
  while (io->Read(&beat)) {
    // The stream was opened for one rank: a beat may not keep another rank alive.
    if (beat.rank() != rank || beat.epoch() != epoch) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "heartbeat stream of rank ", rank, " (registration ", epoch, ") sent a beat for rank ",
          beat.rank(), " (registration ", beat.epoch(), ")"));
      break;
    }
    controller_->Heartbeat(rank, beat, epoch);
  }
  done = true;
  // Before the join: a Detach wakes the writer's NextCommand wait.
  controller_->Detach(rank, epoch,
                      !status.ok()        ? std::string(status.message())
                      : io->IsCancelled() ? "stream cancelled"
                                          : "heartbeat stream closed");
  writer.join();
  return status;
}

absl::Status ControllerHandlers::ReportStep(const CallInfo& call, const proto::StepReport& req) {
  if (absl::Status a = Authenticate(call); !a.ok()) return a;
  return controller_->Report(req);
}

absl::Status ControllerHandlers::Status(const CallInfo& call, proto::StatusResponse* resp) {
  if (absl::Status a = Authenticate(call); !a.ok()) return a;
  *resp = controller_->Status();
  return absl::OkStatus();
}

}  // namespace xhc::controller
