#include "runtime/control/controller/controller_service.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/control/controller/controller_handlers.h"

namespace xhc::controller {
namespace {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

// gRPC's view of one heartbeat stream, for ControllerHandlers::HeartbeatStream.
class GrpcHeartbeatIo final : public HeartbeatIo {
 public:
  GrpcHeartbeatIo(grpc::ServerContext* ctx,
                  grpc::ServerReaderWriter<proto::Command, proto::Heartbeat>* stream)
      : ctx_(ctx), stream_(stream) {}
  bool Read(proto::Heartbeat* beat) override { return stream_->Read(beat); }
  bool Write(const proto::Command& command) override { return stream_->Write(command); }
  void Cancel() override { ctx_->TryCancel(); }
  bool IsCancelled() const override { return ctx_->IsCancelled(); }

 private:
  grpc::ServerContext* ctx_;
  grpc::ServerReaderWriter<proto::Command, proto::Heartbeat>* stream_;
};

CallInfo CallOf(const grpc::ServerContext* ctx) {
  CallInfo call;
  call.peer = ctx->peer();
  const auto& md = ctx->client_metadata();
  if (auto it = md.find(kTokenMetadataKey); it != md.end()) {
    call.token = std::string(it->second.data(), it->second.size());
  }
  return call;
}

}  // namespace

class ControllerServer::Service final : public proto::Controller::Service {
 public:
  Service(Controller* controller, std::string token) : handlers_(controller, std::move(token)) {}

  grpc::Status Register(grpc::ServerContext* ctx, const proto::RegisterRequest* req,
                        proto::RegisterResponse* resp) override {
    return ToGrpc(handlers_.Register(CallOf(ctx), *req, resp));
  }
  grpc::Status KvSet(grpc::ServerContext* ctx, const proto::KvSetRequest* req,
                     proto::Empty*) override {
    return ToGrpc(handlers_.KvSet(CallOf(ctx), *req));
  }
  grpc::Status KvGet(grpc::ServerContext* ctx, const proto::KvGetRequest* req,
                     proto::KvGetResponse* resp) override {
    return ToGrpc(handlers_.KvGet(CallOf(ctx), *req, resp));
  }
  grpc::Status HeartbeatStream(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<proto::Command, proto::Heartbeat>* stream) override {
    GrpcHeartbeatIo io(ctx, stream);
    return ToGrpc(handlers_.HeartbeatStream(CallOf(ctx), &io));
  }
  grpc::Status ReportStep(grpc::ServerContext* ctx, const proto::StepReport* req,
                          proto::Empty*) override {
    return ToGrpc(handlers_.ReportStep(CallOf(ctx), *req));
  }
  grpc::Status Status(grpc::ServerContext* ctx, const proto::Empty*,
                      proto::StatusResponse* resp) override {
    return ToGrpc(handlers_.Status(CallOf(ctx), resp));
  }

 private:
  ControllerHandlers handlers_;
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
