#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_SERVICE_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_SERVICE_H_

// The thin gRPC adapter of Controller: token check on every call, proto <-> logic, and the
// heartbeat/command bidirectional stream (a reader in the handler thread, a writer thread
// pushing commands). A stream that breaks marks its worker dead at once.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/xhc.grpc.pb.h"
#include "runtime/control/controller/controller.h"

namespace xhc::controller {

inline constexpr char kTokenMetadataKey[] = "x-xhc-token";

// The largest request the controller reads; gRPC refuses a bigger one (RESOURCE_EXHAUSTED)
// before it is parsed or reaches a handler. Workers send registrations, heartbeats,
// rendezvous addresses and step reports (a few KiB with their trace spans), far below it.
inline constexpr int kMaxRequestBytes = 4 << 20;

struct TlsFiles {
  std::string cert, key, client_ca;  // PEM paths; all empty = plaintext
};

class ControllerServer {
 public:
  // Listens on `address` ("127.0.0.1:0" picks a free port). `token` is required from clients.
  static absl::StatusOr<std::unique_ptr<ControllerServer>> Start(Controller* controller,
                                                                 const std::string& address,
                                                                 const std::string& token,
                                                                 const TlsFiles& tls);
  ~ControllerServer();
  int port() const { return port_; }
  void Shutdown();

 private:
  ControllerServer() = default;
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_CONTROLLER_SERVICE_H_
