#ifndef XHC_CUDA_CHECK_SHIM_ABSL_STATUS_STATUSOR_H_
#define XHC_CUDA_CHECK_SHIM_ABSL_STATUS_STATUSOR_H_

// See status.h: the subset of absl::StatusOr the CPU reference uses.

#include <optional>
#include <utility>

#include "absl/status/status.h"

namespace absl {

template <typename T>
class StatusOr {
 public:
  StatusOr(Status s) : status_(std::move(s)) {}  // NOLINT: implicit like Abseil's
  StatusOr(T v) : value_(std::move(v)) {}        // NOLINT
  bool ok() const { return status_.ok(); }
  const Status& status() const& { return status_; }
  Status status() && { return std::move(status_); }
  T& value() & { return *value_; }
  T value() && { return std::move(*value_); }
  T& operator*() { return *value_; }
  T* operator->() { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace absl

#endif  // XHC_CUDA_CHECK_SHIM_ABSL_STATUS_STATUSOR_H_
