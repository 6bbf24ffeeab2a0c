// The Status layer works with or without a device: no GPU is a count of 0, not an error.

#include "kernels/cuda/cuda_status.h"

#include "gtest/gtest.h"
#include "kernels/cuda/xhc_cuda.h"

namespace xhc::cuda {
namespace {

TEST(CudaStatus, DeviceCountIsNeverAnErrorWithoutAGpu) {
  absl::StatusOr<int> n = CudaDeviceCount();
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_GE(*n, 0);
  if (*n == 0) {
    EXPECT_STRNE(CudaSkipReason(), "");
  }
}

TEST(CudaStatus, CodesMapByMeaning) {
#if XHC_CUDA_ENABLED
  EXPECT_TRUE(CudaCodeToStatus(0, "x").ok());
  EXPECT_EQ(CudaCodeToStatus(2 /* cudaErrorMemoryAllocation */, "alloc").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(CudaCodeToStatus(kXhcErrInvalidArgument, "shape").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CublasToStatus(3 /* CUBLAS_STATUS_ALLOC_FAILED */, "gemm").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(NcclToStatus(4 /* ncclInvalidArgument */, "send").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NcclToStatus(6 /* ncclRemoteError */, "recv").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(-2.5f)), -2.5f);
#else
  EXPECT_EQ(CudaCodeToStatus(1, "x").code(), absl::StatusCode::kUnavailable);
#endif
}

absl::Status MacroUser(int code) {
  CUDA_RETURN_IF_ERROR(code);
  return absl::OkStatus();
}

TEST(CudaStatus, ReturnIfErrorMacro) {
  EXPECT_TRUE(MacroUser(0).ok());
  absl::Status s = MacroUser(1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("code"), std::string::npos) << s;  // names the expression
}

}  // namespace
}  // namespace xhc::cuda
