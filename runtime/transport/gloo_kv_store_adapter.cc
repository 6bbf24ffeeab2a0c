#include "runtime/transport/gloo_kv_store_adapter.h"

#include <utility>

#include "gloo/common/error.h"

namespace xhc {

GlooKvStoreAdapter::GlooKvStoreAdapter(KvStore* store, std::string prefix,
                                       absl::Duration default_timeout)
    : store_(store), prefix_(std::move(prefix)), default_timeout_(default_timeout) {}

void GlooKvStoreAdapter::Throw(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  throw gloo::IoException(std::string(status.ToString()));
}

absl::Status GlooKvStoreAdapter::first_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return first_error_;
}

void GlooKvStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status status = store_->Set(prefix_ + key, std::string(data.begin(), data.end()));
  if (!status.ok()) Throw(status);
}

std::vector<char> GlooKvStoreAdapter::get(const std::string& key) {
  absl::StatusOr<std::vector<std::string>> values = store_->Get({prefix_ + key}, default_timeout_);
  if (!values.ok()) Throw(values.status());
  const std::string& value = values->front();
  return std::vector<char>(value.begin(), value.end());
}

void GlooKvStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(0));
}

void GlooKvStoreAdapter::wait(const std::vector<std::string>& keys,
                              const std::chrono::milliseconds& timeout) {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) prefixed.push_back(prefix_ + key);
  // gloo passes kNoTimeout (zero) to mean "none"; we never wait unbounded.
  const absl::Duration bound = timeout.count() > 0 ? absl::FromChrono(timeout) : default_timeout_;
  absl::StatusOr<std::vector<std::string>> values = store_->Get(prefixed, bound);
  if (!values.ok()) Throw(values.status());
}

}  // namespace xhc
