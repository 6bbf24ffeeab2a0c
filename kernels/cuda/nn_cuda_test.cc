// Transformer ops (GEMM, RMSNorm, RoPE, SwiGLU, attention, cross-entropy, AdamW), forward
// and backward, against the naive CPU references, shapes with tails (see check/nn_checks.cc).

#include "kernels/cuda/cuda_test_util.h"
#if XHC_CUDA_ENABLED
#include "kernels/cuda/check/checks.h"
#endif

namespace xhc::cuda {
namespace {

TEST(NnCuda, AllOpsMatchCpuReference) {
  XHC_REQUIRE_CUDA();
#if XHC_CUDA_ENABLED
  for (uint64_t seed : {3u, 4u}) {
    for (const check::Result& r : check::CheckNn(seed)) {
      EXPECT_TRUE(r.ok()) << r.name << ": rel_err " << r.rel_err << " (tol " << r.tol << "), NaN "
                          << r.nan_count << " " << r.note;
    }
  }
#endif
}

}  // namespace
}  // namespace xhc::cuda
