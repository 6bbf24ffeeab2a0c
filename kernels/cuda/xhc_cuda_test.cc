// Every fused xHC kernel, forward and backward, against the CPU reference over several
// shapes: attention (K = 1) and MLP (K = 4) sides, mhc, no Gram-Schmidt, channel tails
// (C not a multiple of 8, the vector width, nor of 32 / 64, the tile widths), token tails
// (n not a multiple of the 64-token tiles), sequences shorter than the widest conv, and
// sequences of several 64-token chunks (the convolution backward's walks).

#include <string>
#include <vector>

#include "kernels/cuda/cuda_test_util.h"
#if XHC_CUDA_ENABLED
#include "kernels/cuda/check/checks.h"
#endif

namespace xhc::cuda {
namespace {

struct Case {
  const char* name;
  int B, T, N, k, m, C;
  bool mlp, mhc, gs;
};

class XhcCudaTest : public ::testing::TestWithParam<Case> {};

TEST_P(XhcCudaTest, ForwardAndBackwardMatchCpuReference) {
  XHC_REQUIRE_CUDA();
#if XHC_CUDA_ENABLED
  const Case& p = GetParam();
  check::XhcCase c;
  c.B = p.B, c.T = p.T, c.N = p.N, c.k = p.k, c.m = p.m, c.C = p.C;
  c.mlp = p.mlp, c.mhc = p.mhc, c.gram_schmidt = p.gs;
  for (uint64_t seed : {1u, 2u}) {  // fresh random inputs per seed
    for (const check::Result& r : check::CheckXhc(c, seed)) {
      EXPECT_TRUE(r.ok()) << r.name << ": rel_err " << r.rel_err << " (tol " << r.tol << "), NaN "
                          << r.nan_count << " " << r.note;
    }
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, XhcCudaTest,
    ::testing::Values(Case{"attn_C64", 2, 8, 16, 4, 2, 64, false, false, true},
                      Case{"attn_tailC", 1, 13, 16, 4, 2, 77, false, false, true},
                      Case{"mlp_C64", 2, 16, 16, 4, 2, 64, true, false, true},
                      Case{"mlp_tail_shortT", 3, 7, 8, 4, 1, 100, true, false, true},
                      Case{"mlp_nogs", 1, 20, 16, 4, 2, 48, true, false, false},
                      Case{"mhc", 2, 9, 4, 4, 4, 72, false, true, true},
                      Case{"wide_k8_N32", 1, 17, 32, 8, 2, 264, false, false, true},
                      Case{"mlp_C512", 2, 64, 16, 4, 2, 512, true, false, true},
                      Case{"mlp_conv_chunks", 2, 150, 16, 4, 2, 40, true, false, true},
                      Case{"wide_N32_k4", 1, 10, 32, 4, 2, 24, false, false, true},
                      Case{"mlp_C2048_registers", 1, 12, 16, 4, 2, 2048, true, false, true},
                      Case{"mlp_C1032_register_tail", 1, 10, 16, 4, 2, 1032, true, false, true},
                      Case{"mlp_C2056_shared", 1, 6, 16, 4, 2, 2056, true, false, true}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace xhc::cuda
