#include "runtime/transport/memory_kv_store.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xhc {

absl::Status MemoryKvStore::Set(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("KvStore key must not be empty");
  {
    std::lock_guard<std::mutex> lock(mu_);
    values_[key] = value;
  }
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> MemoryKvStore::Get(const std::vector<std::string>& keys,
                                                            absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_present = [&] {
    for (const std::string& key : keys) {
      if (values_.find(key) == values_.end()) return false;
    }
    return true;
  };
  // An infinite timeout waits without a deadline (now() + max would overflow).
  const bool found = timeout == absl::InfiniteDuration()
                         ? (changed_.wait(lock, all_present), true)
                         : changed_.wait_for(lock, absl::ToChronoNanoseconds(timeout), all_present);
  if (!found) {
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
