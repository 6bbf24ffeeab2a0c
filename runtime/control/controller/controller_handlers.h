#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_HANDLERS_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_HANDLERS_H_

// The controller's RPC handlers with gRPC's transport taken out: the job-token check, the
// bounds on what a request may ask for, and the heartbeat/command stream loop. The gRPC
// service (controller_service.cc) is a thin adapter over these, and the RPC fuzzer
// (tests/fuzz/controller_rpc_fuzzer.cc) calls the very same code with decoded requests, so
// every handler is fuzzed as it runs in production.

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "proto/xhc.pb.h"
#include "runtime/control/controller/controller.h"
#include "runtime/control/controller/peer_limiter.h"

namespace xhc::controller {

// The longest rendezvous wait a KvGet may ask for; a longer (or negative, or absurd)
// timeout_ms is clamped to [0, kMaxKvWaitS] so no request can park a handler thread for
// ever or overflow the deadline arithmetic.
inline constexpr double kMaxKvWaitS = 600;

// Requests that fail authentication, per client host: bursts of kBadTokenBurst, then
// kBadTokenRate a second; beyond that they are refused RESOURCE_EXHAUSTED. A worker with a
// wrong token retries at most a few times a second and always hears why.
inline constexpr double kBadTokenRate = 20;
inline constexpr double kBadTokenBurst = 40;

// One call's transport facts: the x-xhc-token metadata value (nullopt: absent) and the
// client's address as gRPC names it ("ipv4:10.0.0.1:5555").
struct CallInfo {
  std::optional<std::string> token;
  std::string peer;
};

// The two directions of one heartbeat stream. Read blocks for the next beat (false: the
// stream ended); Write sends a command (false: the stream broke); Cancel closes the stream
// from the controller's side, after which Read returns false.
class HeartbeatIo {
 public:
  virtual ~HeartbeatIo() = default;
  virtual bool Read(proto::Heartbeat* beat) = 0;
  virtual bool Write(const proto::Command& command) = 0;
  virtual void Cancel() = 0;
  virtual bool IsCancelled() const = 0;
};

class ControllerHandlers {
 public:
  // `command_poll_s`: how often the stream's writer re-checks that its stream still belongs
  // to the rank's current registration.
  ControllerHandlers(Controller* controller, std::string token, double command_poll_s = 0.2);

  absl::Status Register(const CallInfo& call, const proto::RegisterRequest& req,
                        proto::RegisterResponse* resp);
  absl::Status KvSet(const CallInfo& call, const proto::KvSetRequest& req);
  absl::Status KvGet(const CallInfo& call, const proto::KvGetRequest& req,
                     proto::KvGetResponse* resp);
  // Runs one stream until it ends: the first beat names the rank and the registration
  // epoch; commands for that registration go out on a second thread.
  absl::Status HeartbeatStream(const CallInfo& call, HeartbeatIo* io);
  absl::Status ReportStep(const CallInfo& call, const proto::StepReport& req);
  absl::Status Status(const CallInfo& call, proto::StatusResponse* resp);

 private:
  // Not const: a failure is charged to the caller's host.
  absl::Status Authenticate(const CallInfo& call);

  Controller* controller_;
  std::string token_;
  double command_poll_s_;
  PeerLimiter bad_token_limiter_{kBadTokenRate, kBadTokenBurst};
};

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_HANDLERS_H_
