#ifndef XHC_RUNTIME_TRANSPORT_MEMORY_KV_STORE_H_
#define XHC_RUNTIME_TRANSPORT_MEMORY_KV_STORE_H_

// An in-process KvStore for tests that run several ranks as threads of one process.

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/transport/kv_store.h"

namespace xhc {

class MemoryKvStore : public KvStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;            // notified on every Set
  std::map<std::string, std::string> values_;  // guarded by mu_
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_MEMORY_KV_STORE_H_
