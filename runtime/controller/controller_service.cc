#include "runtime/controller/controller_service.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/checkpoint/file_io.h"
#include "base/status_macros.h"

namespace xhc::controller {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

class ControllerServer::Service final : public proto::Controller::Service {
 public:
  Service(Controller* controller, std::string token)
      : controller_(controller), token_(std::move(token)) {}

  grpc::Status Register(grpc::ServerContext* ctx, const proto::RegisterRequest* req,
                        proto::RegisterResponse* resp) override {
    if (grpc::Status a = Authenticate(ctx); !a.ok()) return a;
    absl::StatusOr<proto::RegisterResponse> r = controller_->Register(*req);
    if (!r.ok()) return ToGrpc(r.status());
    *resp = *std::move(r);
    return grpc::Status::OK;
  }

  grpc::Status KvSet(grpc::ServerContext* ctx, const proto::KvSetRequest* req,
                     proto::Empty*) override {
    if (grpc::Status a = Authenticate(ctx); !a.ok()) return a;
    controller_->KvSet(req->key(), req->value());
    return grpc::Status::OK;
  }

  grpc::Status KvGet(grpc::ServerContext* ctx, const proto::KvGetRequest* req,
                     proto::KvGetResponse* resp) override {
    if (grpc::Status a = Authenticate(ctx); !a.ok()) return a;
    absl::StatusOr<std::vector<std::string>> v = controller_->KvGet(
        {req->keys().begin(), req->keys().end()}, static_cast<double>(req->timeout_ms()) / 1000);
    if (!v.ok()) return ToGrpc(v.status());
    for (const std::string& s : *v) resp->add_values(s);
    return grpc::Status::OK;
  }

  grpc::Status HeartbeatStream(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<proto::Command, proto::Heartbeat>* stream) override {
    if (grpc::Status a = Authenticate(ctx); !a.ok()) return a;
    proto::Heartbeat first;
    if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no heartbeat");
    const int rank = first.rank();
    if (rank < 0 || rank >= controller_->plan().world_size()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "heartbeat from unknown rank");
    }
    const int64_t epoch = controller_->Attach(rank);
    controller_->Heartbeat(first, epoch);
    std::atomic<bool> done{false};
    // Commands go out on a second thread: gRPC allows one reader and one writer at a time.
    std::thread writer([&] {
      while (!done.load()) {
        bool stale = false;
        std::optional<proto::Command> cmd = controller_->NextCommand(rank, epoch, 0.2, &stale);
        if (stale) {
          ctx->TryCancel();  // replaced: close this worker's stream
          break;
        }
        if (cmd && !stream->Write(*cmd)) break;
      }
    });
    proto::Heartbeat beat;
    while (stream->Read(&beat)) controller_->Heartbeat(beat, epoch);
    done = true;
    writer.join();
    controller_->Detach(rank, epoch,
                        ctx->IsCancelled() ? "stream cancelled" : "heartbeat stream closed");
    return grpc::Status::OK;
  }

  grpc::Status ReportStep(grpc::ServerContext* ctx, const proto::StepReport* req,
                          proto::Empty*) override {
    if (grpc::Status a = Authenticate(ctx); !a.ok()) return a;
    return ToGrpc(controller_->Report(*req));
  }

  grpc::Status Status(grpc::ServerContext* ctx, const proto::Empty*,
                      proto::StatusResponse* resp) override {
    if (grpc::Status a = Authenticate(ctx); !a.ok()) return a;
    *resp = controller_->Status();
    return grpc::Status::OK;
  }

 private:
  grpc::Status Authenticate(grpc::ServerContext* ctx) const {
    const auto& md = ctx->client_metadata();
    auto it = md.find(kTokenMetadataKey);
    if (it == md.end()) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing job token");
    }
    if (std::string(it->second.data(), it->second.size()) != token_) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong job token");
    }
    return grpc::Status::OK;
  }

  Controller* controller_;
  std::string token_;
};

absl::StatusOr<std::unique_ptr<ControllerServer>> ControllerServer::Start(
    Controller* controller, const std::string& address, const std::string& token,
    const TlsFiles& tls) {
  auto server = std::unique_ptr<ControllerServer>(new ControllerServer());
  server->service_ = std::make_unique<Service>(controller, token);
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!tls.cert.empty()) {
    ASSIGN_OR_RETURN(std::string cert, ReadWholeFile(tls.cert));
    ASSIGN_OR_RETURN(std::string key, ReadWholeFile(tls.key));
    grpc::SslServerCredentialsOptions opts(
        tls.client_ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                              : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    opts.pem_key_cert_pairs.push_back({key, cert});
    if (!tls.client_ca.empty()) {
      ASSIGN_OR_RETURN(opts.pem_root_certs, ReadWholeFile(tls.client_ca));
    }
    creds = grpc::SslServerCredentials(opts);
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, creds, &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("controller: cannot listen on ", address));
  }
  return server;
}

void ControllerServer::Shutdown() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

ControllerServer::~ControllerServer() { Shutdown(); }

}  // namespace xhc::controller
