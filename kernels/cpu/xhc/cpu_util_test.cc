// The register-sweep helpers of cpu_util.h claim the bits of the plain loops they replace
// (the kernels' results, and the checkpoints they lead to, must not move when one is used):
// AddScaledRows against y = start (or zeros) then one Axpy per term, AccumulateProducts
// against one product pass per term, MultiDot against one Dot per stream, WeightedSums against
// one WeightedSum per output, over widths that leave each of their tails.
// Compiled with the kernels' -ffp-contract=off, so no side gets fused multiply-adds.
#include "kernels/cpu/xhc/cpu_util.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "base/test_seed.h"
#include "gtest/gtest.h"

namespace xhc::kernels::cpu {
namespace {

std::vector<float> Draw(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr int kWidths[] = {1, 15, 16, 63, 64, 65, 200, 512};

// Every stream count through MultiDot's groups of 4 and each remainder (1-3), more than the
// 16 streams of xhc's tokens included.
TEST(CpuUtilTest, MultiDotIsOneDotPerStream) {
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed("cpu-util-multidot")));
  for (const int n : kWidths) {
    for (const int m : {1, 2, 3, 4, 5, 7, 8, 16, 17, 19, 33}) {
      const int ldx = n + 3;
      const std::vector<float> a = Draw(rng, n), x = Draw(rng, static_cast<size_t>(m) * ldx);
      std::vector<float> want(m), got(m, -1.0f);
      for (int i = 0; i < m; ++i) {
        want[i] = Dot(n, a.data(), x.data() + static_cast<size_t>(i) * ldx);
      }
      MultiDot(n, a.data(), m, x.data(), ldx, got.data());
      ASSERT_TRUE(SameBits(want, got)) << "n=" << n << " m=" << m;
    }
  }
}

// Output counts 0-9 (xhc_flash's later sublayers pass 1-4; more go 4 at a time), each output
// against WeightedSum with its own row of h; nout = 0 must leave y untouched.
TEST(CpuUtilTest, WeightedSumsIsOneWeightedSumPerOutput) {
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed("cpu-util-weighted-sums")));
  for (const int n : kWidths) {
    for (const int m : {1, 4, 16}) {
      for (int nout = 0; nout <= 9; ++nout) {
        const int ldx = n + 5, ldy = n + 2;
        const std::vector<float> x = Draw(rng, static_cast<size_t>(m) * ldx);
        const std::vector<float> h = Draw(rng, static_cast<size_t>(nout) * m);
        // At least one row, so nout = 0 has something to leave alone.
        std::vector<float> want(static_cast<size_t>(std::max(nout, 1)) * ldy, -3.0f), got = want;
        for (int o = 0; o < nout; ++o) {
          WeightedSum(n, m, h.data() + o * m, x.data(), ldx, want.data() + o * ldy);
        }
        WeightedSums(n, m, nout, h.data(), x.data(), ldx, got.data(), ldy);
        ASSERT_TRUE(SameBits(want, got)) << "n=" << n << " m=" << m << " nout=" << nout;
      }
    }
  }
}

TEST(CpuUtilTest, AddScaledRowsIsTheAxpySequence) {
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed()));
  for (int n : kWidths) {
    for (int m : {0, 1, 4, 8, 49}) {
      const std::vector<float> x = Draw(rng, static_cast<size_t>(m) * n), h = Draw(rng, m);
      const std::vector<float> init = Draw(rng, n);
      std::vector<const float*> rows(m);
      for (int i = 0; i < m; ++i) rows[i] = x.data() + static_cast<size_t>(i) * n;
      for (int start = 0; start < 3; ++start) {  // zeros, another row, y itself
        std::vector<float> want(n, 0.0f);
        if (start > 0) want = init;
        for (int i = 0; i < m; ++i) Axpy(n, h[i], rows[i], want.data());
        std::vector<float> got(n, 7.0f);
        if (start == 2) got = init;
        const float* s = start == 0 ? nullptr : start == 1 ? init.data() : got.data();
        AddScaledRows(n, m, h.data(), rows.data(), s, got.data());
        EXPECT_TRUE(SameBits(got, want)) << "n " << n << " m " << m << " start " << start;
      }
    }
  }
}

TEST(CpuUtilTest, AccumulateProductsIsOnePassPerTerm) {
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed()));
  for (int n : kWidths) {
    for (int terms : {1, 4, 12}) {
      const ptrdiff_t lda = n + 3, ldb = 2 * n;  // strided rows, as the conv weights and taps
      const std::vector<float> a = Draw(rng, terms * lda), b = Draw(rng, terms * ldb);
      const std::vector<float> init = Draw(rng, n);
      for (bool accumulate : {false, true}) {
        std::vector<float> want = accumulate ? init : std::vector<float>(n, 0.0f);
        for (int i = 0; i < terms; ++i) {
          for (int c = 0; c < n; ++c) want[c] += a[i * lda + c] * b[i * ldb + c];
        }
        std::vector<float> got = init;
        AccumulateProducts(n, terms, a.data(), lda, b.data(), ldb, got.data(), accumulate);
        EXPECT_TRUE(SameBits(got, want))
            << "n " << n << " terms " << terms << " accumulate " << accumulate;
      }
    }
  }
}

}  // namespace
}  // namespace xhc::kernels::cpu
