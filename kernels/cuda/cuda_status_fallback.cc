// Built instead of the CUDA sources when there is no toolkit (or XHC_DISABLE_CUDA=1): the
// Status layer still links, reports zero devices, and every test skips visibly.

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_status.h"

namespace xhc::cuda {

absl::Status CudaCodeToStatus(int code, const char* what) {
  if (code == 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(what, ": built without the CUDA toolkit"));
}
absl::Status CublasToStatus(int st, const char* what) { return CudaCodeToStatus(st, what); }
absl::Status NcclToStatus(int r, const char* what) { return CudaCodeToStatus(r, what); }
absl::StatusOr<int> CudaDeviceCount() { return 0; }
const char* CudaSkipReason() {
  return "built without the CUDA toolkit (XHC_CUDA_ENABLED=0: no nvcc/nccl.h found, or "
         "XHC_DISABLE_CUDA=1)";
}

bool StrictGpu() {
  const char* v = std::getenv("XHC_STRICT_GPU");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace xhc::cuda
