#ifndef XHC_RUNTIME_TRANSPORT_GLOO_KV_STORE_ADAPTER_H_
#define XHC_RUNTIME_TRANSPORT_GLOO_KV_STORE_ADAPTER_H_

// Presents a KvStore as the gloo::rendezvous::Store that gloo's connectFullMesh wants.
// gloo's Store reports failure by throwing, so this adapter throws gloo::IoException; the
// Status behind the throw is kept (first_error()) so GlooTransport::Create can return the
// precise code (kDeadlineExceeded for a rank that never showed up) instead of a string.

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gloo/rendezvous/store.h"
#include "runtime/transport/kv_store.h"

namespace xhc {

class GlooKvStoreAdapter : public gloo::rendezvous::Store {
 public:
  // Every key gloo uses is stored as `prefix` + key, so several rendezvous (one per job
  // attempt) can share one store. `default_timeout` bounds the waits gloo issues without
  // one (Store::get). `store` must outlive the adapter.
  GlooKvStoreAdapter(KvStore* store, std::string prefix, absl::Duration default_timeout);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // The first error that was thrown to gloo; OK if none.
  absl::Status first_error() const;

 private:
  // Records `status` and throws it as a gloo::IoException.
  [[noreturn]] void Throw(const absl::Status& status);

  KvStore* const store_;
  const std::string prefix_;
  const absl::Duration default_timeout_;
  mutable std::mutex mu_;
  absl::Status first_error_;  // guarded by mu_
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_GLOO_KV_STORE_ADAPTER_H_
