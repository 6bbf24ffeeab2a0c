#ifndef XHC_KERNELS_CUDA_CUDA_TEST_UTIL_H_
#define XHC_KERNELS_CUDA_CUDA_TEST_UTIL_H_

// XHC_REQUIRE_CUDA(): skips the test VISIBLY (reported as skipped with the reason) when the
// build has no toolkit or the machine no usable GPU; under XHC_STRICT_GPU=1 that is a failure
// instead. A driver that is installed but fails is always a failure. CUDA tests never pass by
// doing nothing.

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_status.h"

#define XHC_REQUIRE_CUDA()                                                 \
  do {                                                                     \
    absl::StatusOr<int> xhc_n_ = ::xhc::cuda::CudaDeviceCount();           \
    ASSERT_TRUE(xhc_n_.ok()) << xhc_n_.status();                           \
    if (*xhc_n_ == 0 || !XHC_CUDA_ENABLED) {                               \
      if (::xhc::cuda::StrictGpu()) {                                      \
        FAIL() << "XHC_STRICT_GPU=1 and this CUDA test would skip: "       \
               << ::xhc::cuda::CudaSkipReason();                           \
      }                                                                    \
      GTEST_SKIP() << "no CUDA device: " << ::xhc::cuda::CudaSkipReason(); \
    }                                                                      \
  } while (0)

#endif  // XHC_KERNELS_CUDA_CUDA_TEST_UTIL_H_
