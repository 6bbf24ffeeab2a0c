#ifndef XHC_RUNTIME_TRANSPORT_FILE_KV_STORE_H_
#define XHC_RUNTIME_TRANSPORT_FILE_KV_STORE_H_

// A KvStore in a directory shared by the processes of one machine (multi-process tests and
// single-host launches without a controller). One file per key; a value becomes visible
// atomically (write to a temporary name, then rename), so a reader never sees half a value.
// Get polls the directory, which is plenty for a rendezvous of a few keys per rank.

#include <string>
#include <vector>

#include "runtime/transport/kv_store.h"

namespace xhc {

class FileKvStore : public KvStore {
 public:
  // `directory` must exist; it is not created, so a typo fails loudly in Set.
  explicit FileKvStore(std::string directory);

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::vector<std::string>> Get(const std::vector<std::string>& keys,
                                               absl::Duration timeout) override;

 private:
  // Keys may hold '/' and other bytes a file name cannot; they are hex-escaped.
  std::string PathOf(const std::string& key) const;

  const std::string directory_;
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_FILE_KV_STORE_H_
