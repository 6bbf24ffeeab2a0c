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

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const ClientTls& tls);

// Reads a job token file (trailing whitespace stripped).
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_RPC_UTIL_H_
