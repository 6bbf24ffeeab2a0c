#include "kernels/cuda/cuda_status.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/xhc_cuda.h"

namespace xhc::cuda {

absl::Status CudaCodeToStatus(int code, const char* what) {
  if (code == 0) return absl::OkStatus();
  if (code >= kXhcErrCublasBase && code < kXhcErrCublasBase + 1000) {
    return CublasToStatus(code - kXhcErrCublasBase, what);
  }
  const std::string msg = absl::StrCat(what, ": ", ErrorString(code), " (", code, ")");
  if (code == kXhcErrInvalidArgument) return absl::InvalidArgumentError(msg);
  if (code == kXhcErrNoCuda) return absl::UnavailableError(msg);
  switch (static_cast<cudaError_t>(code)) {
    case cudaErrorMemoryAllocation: return absl::ResourceExhaustedError(msg);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInitializationError: return absl::UnavailableError(msg);
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorNoKernelImageForDevice: return absl::InvalidArgumentError(msg);
    default: return absl::InternalError(msg);
  }
}

absl::Status CublasToStatus(int st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": cuBLAS status ", st);
  switch (static_cast<cublasStatus_t>(st)) {
    case CUBLAS_STATUS_ALLOC_FAILED: return absl::ResourceExhaustedError(msg);
    case CUBLAS_STATUS_NOT_INITIALIZED: return absl::FailedPreconditionError(msg);
    case CUBLAS_STATUS_INVALID_VALUE:
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH: return absl::InvalidArgumentError(msg);
    default: return absl::InternalError(msg);
  }
}

absl::Status NcclToStatus(int r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  const std::string msg =
      absl::StrCat(what, ": ", ncclGetErrorString(static_cast<ncclResult_t>(r)));
  switch (static_cast<ncclResult_t>(r)) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return absl::InvalidArgumentError(msg);
    case ncclRemoteError:
    case ncclSystemError: return absl::UnavailableError(msg);  // a lost peer or a failing link
    default: return absl::InternalError(msg);
  }
}

absl::StatusOr<int> CudaDeviceCount() {
  int count = 0;
  const int e = DeviceCount(&count);
  if (e != 0) return CudaCodeToStatus(e, "cudaGetDeviceCount");
  return count;
}

const char* CudaSkipReason() {
  static const std::string reason = [] {
    absl::StatusOr<int> n = CudaDeviceCount();
    if (!n.ok()) return std::string(n.status().ToString());
    if (*n == 0) return std::string("cudaGetDeviceCount reports 0 devices (no GPU or driver)");
    return std::string();
  }();
  return reason.c_str();
}

bool StrictGpu() {
  const char* v = std::getenv("XHC_STRICT_GPU");
  return v != nullptr && std::string(v) == "1";
}

}  // namespace xhc::cuda
