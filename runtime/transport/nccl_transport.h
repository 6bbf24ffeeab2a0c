#ifndef XHC_RUNTIME_TRANSPORT_NCCL_TRANSPORT_H_
#define XHC_RUNTIME_TRANSPORT_NCCL_TRANSPORT_H_

// Transport over NCCL for GPU workers: buffers are device pointers; every send/receive is
// issued on a communication stream of its own (so transfers overlap the compute stream) and
// completes through a CUDA event; Wait polls the event up to its deadline and, on timeout or
// Abort, aborts the communicator (ncclCommAbort) so no call hangs on a dead peer. The NCCL
// unique id travels through the same KvStore as gloo's rendezvous (the controller's KV).
//
// Built only where the CUDA toolkit is (third_party/cuda.bzl); elsewhere Create returns
// kUnimplemented saying so.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/transport/kv_store.h"
#include "runtime/transport/transport.h"

namespace xhc {

struct NcclTransportOptions {
  int rank = 0;
  int world_size = 1;
  int device = 0;  // CUDA device ordinal
  std::string store_prefix = "xhc/nccl/";
  absl::Duration connect_timeout = absl::Seconds(60);
};

// Rendezvous (rank 0 publishes the unique id), then ncclCommInitRank.
absl::StatusOr<std::unique_ptr<Transport>> CreateNcclTransport(const NcclTransportOptions& options,
                                                               KvStore* store);

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_NCCL_TRANSPORT_H_
