#ifndef XHC_RUNTIME_WORKER_RPC_UTIL_H_
#define XHC_RUNTIME_WORKER_RPC_UTIL_H_

// Client-side gRPC helpers shared by the worker and `xhc status`.

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace xhc::worker {

struct ClientTls {
  std::string ca, cert, key;  // PEM paths; ca empty = plaintext
};

// Adds the job token and a deadline `timeout_s` from now.
void PrepareContext(grpc::ClientContext* ctx, const std::string& token, double timeout_s);

// grpc::Status → absl::Status with `what` prefixed; UNAUTHENTICATED gets a hint.
absl::Status FromGrpc(const grpc::Status& s, const std::string& what);

// When `s` (UNAVAILABLE) is a TLS handshake that failed: " (...)" saying why in terms of
// this client's flags, for a refusal retrying will not fix. "" when it is not one.
std::string ExplainTlsFailure(const grpc::Status& s, const ClientTls& tls);

// For a controller still UNAVAILABLE after `waited_s` of retries: " (...)" with the likely
// causes, a plaintext client against a TLS controller among them.
std::string ExplainUnreachable(const grpc::Status& s, const ClientTls& tls, double waited_s);

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const ClientTls& tls);

// Reads a job token file (trailing whitespace stripped).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_RPC_UTIL_H_
