#include "runtime/worker/rpc_util.h"

#include <chrono>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file_read.h"
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

namespace {

bool Contains(const std::string& lower_text, const char* what) {
  return lower_text.find(what) != std::string::npos;
}

}  // namespace

std::string ExplainTlsFailure(const grpc::Status& s, const ClientTls& tls) {
  if (s.error_code() != grpc::StatusCode::UNAVAILABLE || tls.ca.empty()) return "";
  const std::string m = absl::AsciiStrToLower(s.error_message());
  // This side's handshake failed: the controller's certificate is not signed by our CA, or
  // it names another host, or the controller speaks plaintext.
  if (Contains(m, "certificate verify failed")) {
    return absl::StrCat(
        " (TLS: this worker does not trust the controller's certificate: it is not signed by "
        "--tls-ca ",
        tls.ca, ", or its subjectAltName does not name the controller's address)");
  }
  if (Contains(m, "handshake")) {
    return absl::StrCat(
        " (TLS handshake with the controller failed: does the controller serve "
        "TLS (--tls-cert/--tls-key) with a certificate signed by --tls-ca ",
        tls.ca, "?)");
  }
  // With TLS 1.3 the client's half of the handshake completes before the server checks the
  // client's certificate; a controller that refuses it closes the connection on the first
  // read, which reaches us as a closed secure endpoint rather than a handshake error.
  if (Contains(m, "secure read failed") || Contains(m, "socket closed") ||
      Contains(m, "connection reset")) {
    if (tls.cert.empty()) {
      return " (TLS: the controller closed the connection after the handshake: it requires a "
             "client certificate (--tls-client-ca); pass --tls-cert and --tls-key)";
    }
    return absl::StrCat(
        " (TLS: the controller closed the connection after the handshake: it "
        "refused this worker's client certificate --tls-cert ",
        tls.cert,
        ", which must be signed by the CA the controller was given as "
        "--tls-client-ca)");
  }
  return "";
}

std::string ExplainUnreachable(const grpc::Status& s, const ClientTls& tls, double waited_s) {
  const std::string m = absl::AsciiStrToLower(s.error_message());
  std::string why = absl::StrCat(" (no answer after ", waited_s, " s of retries");
  if (Contains(m, "connection refused")) {
    absl::StrAppend(&why, ": nothing listens there; is the controller running?)");
  } else if (tls.ca.empty()) {
    // A plaintext HTTP/2 preface to a TLS server fails its handshake; it drops the
    // connection, and this side sees only a closed socket.
    absl::StrAppend(&why,
                    ": the controller closes the connection; if it serves TLS, pass "
                    "--tls-ca (and --tls-cert/--tls-key if it requires client "
                    "certificates))");
  } else {
    absl::StrAppend(&why, ")");
  }
  return why;
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
