// DotRows / AxpyRows (both the AVX-512 and the portable versions) against double-precision
// products, on shapes with ragged tails (columns not a multiple of 16, chunks, token tiles).

#include "kernels/cpu/xhc/skinny_gemm.h"

#include <cmath>
#include <random>
#include <vector>

#include "base/test_seed.h"
#include "gtest/gtest.h"

namespace xhc::kernels::cpu {
namespace {

struct Shape {
  int nt, R, D;
};

class SkinnyGemmTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { ForcePortableSkinnyGemmForTesting(GetParam()); }
  void TearDown() override { ForcePortableSkinnyGemmForTesting(false); }
};

// A float sum of `terms` products, in any order and lane structure, is within
// (terms + 1) * u * sum|products| of the exact value to first order (u = 2^-24: one rounding
// per product, at most terms - 1 per addition chain, one for an accumulated output): the
// bound is derived from the operation, not tuned to a draw. 1% covers the second-order term.
double SumBound(int terms, double mag) { return 1.01 * (terms + 2) * 0x1p-24 * mag; }

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

TEST_P(SkinnyGemmTest, DotRowsMatchesDouble) {
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed(GetParam() ? "portable" : "native")));
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 5, 17}, Shape{16, 32, 2100}, Shape{7, 36, 1030},
                        Shape{20, 8, 4096}}) {
    const size_t ldx = s.D + 3, ldw = s.D + 5;
    const int ldo = s.R + 2;
    auto X = Random(s.nt * ldx, rng), W = Random(s.R * ldw, rng);
    std::vector<float> out(s.nt * ldo, -7.0f);
    DotRows(s.nt, s.R, s.D, X.data(), ldx, W.data(), ldw, out.data(), ldo);
    for (int t = 0; t < s.nt; ++t) {
      for (int r = 0; r < s.R; ++r) {
        double ref = 0, mag = 0;
        for (int c = 0; c < s.D; ++c) {
          ref += double(X[t * ldx + c]) * W[r * ldw + c];
          mag += std::fabs(double(X[t * ldx + c]) * W[r * ldw + c]);
        }
        ASSERT_NEAR(out[t * ldo + r], ref, SumBound(s.D, mag)) << t << " " << r << " D=" << s.D;
      }
      for (int r = s.R; r < ldo; ++r) ASSERT_EQ(out[t * ldo + r], -7.0f);  // untouched
    }
  }
}

TEST_P(SkinnyGemmTest, AxpyRowsMatchesDouble) {
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed(GetParam() ? "portable" : "native")));
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 5, 17}, Shape{16, 32, 2100}, Shape{5, 20, 1037}}) {
    for (bool accumulate : {false, true}) {
      const int lda = s.R + 1;
      const size_t ldw = s.D + 3, ldo = s.D + 4;
      auto A = Random(s.nt * lda, rng), W = Random(s.R * ldw, rng);
      auto out = Random(s.nt * ldo, rng);
      const auto before = out;
      AxpyRows(s.nt, s.R, s.D, A.data(), lda, W.data(), ldw, out.data(), ldo, accumulate);
      for (int t = 0; t < s.nt; ++t) {
        for (int c = 0; c < s.D; ++c) {
          double ref = accumulate ? before[t * ldo + c] : 0.0, mag = std::fabs(ref);
          for (int r = 0; r < s.R; ++r) {
            ref += double(A[t * lda + r]) * W[r * ldw + c];
            mag += std::fabs(double(A[t * lda + r]) * W[r * ldw + c]);
          }
          ASSERT_NEAR(out[t * ldo + c], ref, SumBound(s.R, mag)) << t << " " << c;
        }
        for (size_t c = s.D; c < ldo; ++c) ASSERT_EQ(out[t * ldo + c], before[t * ldo + c]);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, SkinnyGemmTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "portable" : "dispatched"; });

}  // namespace
}  // namespace xhc::kernels::cpu
