#ifndef XHC_RUNTIME_WORKER_GRPC_KV_STORE_H_
#define XHC_RUNTIME_WORKER_GRPC_KV_STORE_H_

// KvStore backed by the controller's KvSet/KvGet RPCs: the gloo rendezvous of a job needs
// nothing but the controller's address.

#include <functional>
#include <memory>
#include <string>

#include "proto/xhc.grpc.pb.h"
#include "runtime/transport/kv_store.h"

namespace xhc::worker {

class GrpcKvStore : public KvStore {
 public:
  GrpcKvStore(proto::Controller::Stub* stub, std::string token)
      : stub_(stub), token_(std::move(token)) {}
  // Get gives up with kAborted as soon as `cancelled` returns true (checked every 0.5 s):
  // a rendezvous for a generation the controller already abandoned must not block the next.
  void SetCancelled(std::function<bool()> cancelled) { cancelled_ = std::move(cancelled); }
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

 private:
  proto::Controller::Stub* stub_;
  std::string token_;
  std::function<bool()> cancelled_;
};

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_GRPC_KV_STORE_H_
