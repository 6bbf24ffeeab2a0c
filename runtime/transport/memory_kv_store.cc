#include "runtime/transport/memory_kv_store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xhc {

absl::Status MemoryKvStore::Set(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("KvStore key must not be empty");
  absl::MutexLock lock(&mu_);
  values_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MemoryKvStore::Get(const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto all_present = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& key : keys) {
      if (values_.find(key) == values_.end()) return false;
    }
    return true;
  };
  // AwaitWithTimeout re-evaluates the condition on every Set (every mutex release).
  if (!mu_.AwaitWithTimeout(absl::Condition(&all_present), timeout)) {
    std::vector<std::string> missing;
    for (const std::string& key : keys) {
      if (values_.find(key) == values_.end()) missing.push_back(key);
    }
    return absl::DeadlineExceededError(
        absl::StrCat("KvStore: timed out after ", absl::FormatDuration(timeout),
                     " waiting for keys [", absl::StrJoin(missing, ", "), "]"));
  }
  std::vector<std::string> values;
  values.reserve(keys.size());
  for (const std::string& key : keys) values.push_back(values_[key]);
  return values;
}

}  // namespace xhc
