#ifndef XHC_RUNTIME_CONTROL_DASHBOARD_DASHBOARD_SERVER_H_
#define XHC_RUNTIME_CONTROL_DASHBOARD_DASHBOARD_SERVER_H_

// The controller's read-only HTTP server (cpp-httplib, plain HTTP): the live dashboard page
// at /, its data at /api/state, Prometheus text at /metrics. Every request takes one
// Controller::View (a copy made under the controller's lock) and renders it outside the
// lock on the server's own small thread pool, so a slow or busy client never holds up the
// step loop.
//
// Access: on a loopback address (127.0.0.0/8, ::1, localhost) anyone on this machine may
// read. On any other address every request must carry the job token, as
// `Authorization: Bearer TOKEN` or `?token=TOKEN`; others get 401.

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "runtime/control/controller/controller.h"

namespace httplib {
class Server;
}

namespace xhc::dashboard {

struct HostPort {
  std::string host;
  int port = 0;
};

// "127.0.0.1:8080", "0.0.0.0:0", "[::1]:9000", "localhost:0" (port 0 = any free port).
absl::StatusOr<HostPort> ParseHostPort(const std::string& address);

bool IsLoopback(const std::string& host);

class DashboardServer {
 public:
  // Listens on `address`. `token` is required from clients unless the address is loopback;
  // a non-loopback address with an empty token is refused.
  static absl::StatusOr<std::unique_ptr<DashboardServer>> Start(controller::Controller* controller,
                                                                const std::string& address,
                                                                const std::string& token);
  ~DashboardServer();

  int port() const { return port_; }
  bool requires_token() const { return requires_token_; }
  // "http://HOST:PORT/" as a browser on this machine would open it.
  std::string url() const;
  void Shutdown();

 private:
  DashboardServer() = default;
  void Route();

  controller::Controller* controller_ = nullptr;
  std::string host_, token_;
  bool requires_token_ = false;
  int port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace xhc::dashboard

#endif  // XHC_RUNTIME_CONTROL_DASHBOARD_DASHBOARD_SERVER_H_
