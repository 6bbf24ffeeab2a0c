#include "runtime/worker/rpc_util.h"

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "runtime/checkpoint/file_io.h"
#include "base/status_macros.h"

namespace xhc::worker {

void PrepareContext(grpc::ClientContext* ctx, const std::string& token, double timeout_s) {
  ctx->AddMetadata("x-xhc-token", token);
  ctx->set_deadline(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
}

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", s.error_message());
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    absl::StrAppend(&message, " (the controller refused this job token)");
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), message);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const ClientTls& tls) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!tls.ca.empty()) {
    grpc::SslCredentialsOptions opts;
    ASSIGN_OR_RETURN(opts.pem_root_certs, ReadWholeFile(tls.ca));
    if (!tls.cert.empty()) {
      ASSIGN_OR_RETURN(opts.pem_cert_chain, ReadWholeFile(tls.cert));
      ASSIGN_OR_RETURN(opts.pem_private_key, ReadWholeFile(tls.key));
    }
    creds = grpc::SslCredentials(opts);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return grpc::CreateCustomChannel(address, creds, args);
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return absl::NotFoundError(absl::StrCat("token file ", path, " not readable"));
  return std::string(absl::StripAsciiWhitespace(*text));
}

}  // namespace xhc::worker
