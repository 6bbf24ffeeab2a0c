#ifndef XHC_RUNTIME_TRANSPORT_FAILURE_LATCH_H_
#define XHC_RUNTIME_TRANSPORT_FAILURE_LATCH_H_

// Records the first failure of a Transport so that every later call reports it (the
// "first failure fails the transport" rule of transport.h). Thread-safe.

#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace xhc {

class FailureLatch {
 public:
  // Keeps `status` if it is the first failure.
  void Record(const absl::Status& status) {
    if (status.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.ok()) first_ = status;
  }

  // OK while healthy; otherwise the first failure's code with a message that says this call
  // was refused because of it.
  absl::Status Check(const std::string& what) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.ok()) return first_;
    return absl::Status(
        first_.code(),
        absl::StrCat(what, " refused: transport failed earlier: ", first_.message()));
  }

  bool failed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return !first_.ok();
  }

 private:
  mutable std::mutex mu_;
  absl::Status first_;
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_FAILURE_LATCH_H_
