#ifndef XHC_CUDA_CHECK_SHIM_ABSL_STATUS_STATUS_H_
#define XHC_CUDA_CHECK_SHIM_ABSL_STATUS_STATUS_H_

// Minimal stand-in for the few Abseil names the CPU reference uses (Status, OkStatus,
// InvalidArgumentError, FailedPreconditionError), so the standalone device check (device_check.sh)
// builds on a machine that has the CUDA toolkit but no Abseil. Never used by the Bazel build.

#include <string>
#include <utility>

namespace absl {

enum class StatusCode { kOk = 0, kInvalidArgument = 3, kFailedPrecondition = 9, kInternal = 13 };

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string msg) : code_(code), msg_(std::move(msg)) {}
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return msg_; }
  std::string ToString() const { return ok() ? "OK" : msg_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string msg_;
};

inline Status OkStatus() { return Status(); }
inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }

}  // namespace absl

#endif  // XHC_CUDA_CHECK_SHIM_ABSL_STATUS_STATUS_H_
