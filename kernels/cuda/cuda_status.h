#ifndef XHC_KERNELS_CUDA_CUDA_STATUS_H_
#define XHC_KERNELS_CUDA_CUDA_STATUS_H_

// CUDA / cuBLAS / NCCL error codes to absl::Status. Compiled by g++ (never by nvcc), so the
// .cu files stay free of Abseil. Codes are chosen by meaning: out of memory is
// kResourceExhausted, a missing or unusable device kUnavailable, a bad launch configuration
// or unsupported shape kInvalidArgument, everything else kInternal.

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xhc::cuda {

// `code` is what the C-style API (xhc_cuda.h) returns: a cudaError_t, kXhcErr*, or
// kXhcErrCublasBase + cublasStatus_t. `what` names the call for the message.
absl::Status CudaCodeToStatus(int code, const char* what);
absl::Status CublasToStatus(int cublas_status, const char* what);
absl::Status NcclToStatus(int nccl_result, const char* what);

// Number of usable CUDA devices: 0 (not an error) when no driver is installed, the driver
// sees no GPU, or the build has no toolkit. A driver that is installed but fails is an error.
absl::StatusOr<int> CudaDeviceCount();

// Why a CUDA test should skip, or "" when a device is usable. Used in GTEST_SKIP messages.
const char* CudaSkipReason();

// XHC_STRICT_GPU=1 (the device script sets it): a CUDA test that would skip fails instead,
// so a GPU machine on which CUDA silently went missing cannot report a pass.
bool StrictGpu();

}  // namespace xhc::cuda

#define XHC_STATUS_CONCAT_INNER_(a, b) a##b
#define XHC_STATUS_CONCAT_(a, b) XHC_STATUS_CONCAT_INNER_(a, b)

// CUDA_RETURN_IF_ERROR(expr): expr is a cudaError_t or a C-API code; returns a Status.
#define CUDA_RETURN_IF_ERROR(expr)                                                               \
  do {                                                                                           \
    const int XHC_STATUS_CONCAT_(xhc_cuda_code_, __LINE__) = static_cast<int>(expr);             \
    if (XHC_STATUS_CONCAT_(xhc_cuda_code_, __LINE__) != 0) {                                     \
      return ::xhc::cuda::CudaCodeToStatus(XHC_STATUS_CONCAT_(xhc_cuda_code_, __LINE__), #expr); \
    }                                                                                            \
  } while (0)

#define CUBLAS_RETURN_IF_ERROR(expr)                                                             \
  do {                                                                                           \
    const int XHC_STATUS_CONCAT_(xhc_cublas_code_, __LINE__) = static_cast<int>(expr);           \
    if (XHC_STATUS_CONCAT_(xhc_cublas_code_, __LINE__) != 0) {                                   \
      return ::xhc::cuda::CublasToStatus(XHC_STATUS_CONCAT_(xhc_cublas_code_, __LINE__), #expr); \
    }                                                                                            \
  } while (0)

#define NCCL_RETURN_IF_ERROR(expr)                                                           \
  do {                                                                                       \
    const int XHC_STATUS_CONCAT_(xhc_nccl_code_, __LINE__) = static_cast<int>(expr);         \
    if (XHC_STATUS_CONCAT_(xhc_nccl_code_, __LINE__) != 0) {                                 \
      return ::xhc::cuda::NcclToStatus(XHC_STATUS_CONCAT_(xhc_nccl_code_, __LINE__), #expr); \
    }                                                                                        \
  } while (0)

#endif  // XHC_KERNELS_CUDA_CUDA_STATUS_H_
