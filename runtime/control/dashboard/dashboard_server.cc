#include "runtime/control/dashboard/dashboard_server.h"

#include <arpa/inet.h>
#include <httplib.h>

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/control/dashboard/dashboard_page.h"
#include "runtime/control/dashboard/prometheus_text.h"
#include "runtime/control/dashboard/state_json.h"

namespace xhc::dashboard {
namespace {

// Few threads: a page, a Prometheus server and a curl or two; each request is short.
constexpr int kThreads = 4;

// Compares without an early exit, so response times do not tell how much of a guess matched.
bool SameToken(const std::string& given, const std::string& token) {
  if (token.empty() || given.size() != token.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i) diff |= given[i] ^ token[i];
  return diff == 0;
}

int64_t IntParam(const httplib::Request& req, const char* name) {
  int64_t v = 0;
  if (!req.has_param(name) || !absl::SimpleAtoi(req.get_param_value(name), &v)) return 0;
  return v;
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(const std::string& address) {
  HostPort hp;
  std::string port;
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find("]:");
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--http ", address, ": expected [IPV6]:PORT"));
    }
    hp.host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--http ", address, ": expected HOST:PORT (port 0 = any free port)"));
    }
    hp.host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  if (!absl::SimpleAtoi(port, &hp.port) || hp.port < 0 || hp.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--http ", address, ": port '", port, "' is not a number in 0..65535"));
  }
  return hp;
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

absl::StatusOr<std::unique_ptr<DashboardServer>> DashboardServer::Start(
    controller::Controller* controller, const std::string& address, const std::string& token) {
  absl::StatusOr<HostPort> hp = ParseHostPort(address);
  if (!hp.ok()) return hp.status();
  auto s = std::unique_ptr<DashboardServer>(new DashboardServer());
  s->controller_ = controller;
  s->host_ = hp->host;
  s->token_ = token;
  s->requires_token_ = !IsLoopback(hp->host);
  if (s->requires_token_ && token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http ", address, ": a non-loopback address needs the job token, and there is none"));
  }
  s->server_ = std::make_unique<httplib::Server>();
  s->server_->new_task_queue = [] { return new httplib::ThreadPool(kThreads); };
  s->server_->set_read_timeout(5, 0);
  s->server_->set_write_timeout(5, 0);
  s->server_->set_keep_alive_timeout(2);
  s->Route();
  s->port_ = hp->port == 0 ? s->server_->bind_to_any_port(hp->host)
                           : (s->server_->bind_to_port(hp->host, hp->port) ? hp->port : -1);
  if (s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("--http ", address, ": cannot listen there"));
  }
  httplib::Server* server = s->server_.get();
  s->thread_ = std::thread([server] { server->listen_after_bind(); });
  return s;
}

void DashboardServer::Route() {
  // Runs before every handler: refuses requests without the token where one is needed.
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!requires_token_) return httplib::Server::HandlerResponse::Unhandled;
    std::string given = req.get_param_value("token");
    const std::string auth = req.get_header_value("Authorization");
    if (absl::StartsWith(auth, "Bearer ")) given = auth.substr(7);
    if (SameToken(given, token_)) return httplib::Server::HandlerResponse::Unhandled;
    res.status = 401;
    res.set_header("WWW-Authenticate", "Bearer");
    res.set_content(
        "401: this dashboard needs the job token (Authorization: Bearer TOKEN, or "
        "?token=TOKEN)\n",
        "text/plain");
    return httplib::Server::HandlerResponse::Handled;
  });
  server_->Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(kDashboardHtml, "text/html; charset=utf-8");
  });
  server_->Get("/api/state", [this](const httplib::Request& req, httplib::Response& res) {
    const controller::JobView view =
        controller_->View(IntParam(req, "since"), IntParam(req, "since_checkpoints"));
    res.set_header("Cache-Control", "no-store");
    res.set_content(StateJson(view), "application/json");
  });
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(PrometheusText(controller_->View(-1, -1)), kPrometheusContentType);
  });
}

std::string DashboardServer::url() const {
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return absl::StrCat("http://", host, ":", port_, "/");
}

void DashboardServer::Shutdown() {
  if (server_) {
    // stop() does nothing until the listening loop runs: give a just-started thread a moment.
    for (int i = 0; i < 2000 && !server_->is_running() && thread_.joinable(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    server_->stop();
  }
  if (thread_.joinable()) thread_.join();
}

DashboardServer::~DashboardServer() { Shutdown(); }

}  // namespace xhc::dashboard
