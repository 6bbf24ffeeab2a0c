#ifndef XHC_RUNTIME_TRANSPORT_KV_STORE_H_
#define XHC_RUNTIME_TRANSPORT_KV_STORE_H_

// The rendezvous key-value store through which the ranks of one job exchange their endpoint
// addresses before the data plane connects. The controller backs it with its key-value RPCs
// (a job needs nothing but the controller address); tests back it with memory or a directory.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace xhc {

// Implementations are thread-safe: any number of threads (or processes, for a shared backing
// store) may call Set and Get concurrently. Keys are arbitrary non-empty byte strings;
// values are arbitrary bytes. Keys are never deleted: a new rendezvous (after a restart)
// uses a new key prefix.
class KvStore {
 public:
  virtual ~KvStore() = default;

  // Stores `value` under `key`, replacing any earlier value. Once Set returns OK, every Get
  // that starts afterwards (in any process sharing the store) sees the value.
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;

  // Blocks until every key in `keys` is present, then returns their values in the order of
  // `keys`. kDeadlineExceeded, naming the keys still missing, once `timeout` has passed.
  virtual absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                                       absl::Duration timeout) = 0;
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_KV_STORE_H_
