// DotRows / AxpyRows on every path this CPU supports (avx512, avx2, generic; the others are
// skipped visibly) against double-precision products, on shapes with ragged tails (columns
// not a multiple of 8 or 16, chunks, token tiles); XHC_CPU_ISA parsing.

#include "kernels/cpu/xhc/skinny_gemm.h"

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/test_seed.h"
#include "gtest/gtest.h"
#include "kernels/cpu/xhc/gemm_util.h"

namespace xhc::kernels::cpu {
namespace {

struct Shape {
  int nt, R, D;
};

class SkinnyGemmTest : public ::testing::TestWithParam<SkinnyIsa> {
 protected:
  void SetUp() override {
    if (!CpuSupportsSkinnyIsa(GetParam())) {
      GTEST_SKIP() << "CPU lacks " << SkinnyIsaName(GetParam()) << " (supports " << CpuSkinnyIsas()
                   << ")";
    }
    ASSERT_TRUE(SetSkinnyIsaForTesting(GetParam()).ok());
    ASSERT_EQ(ActiveSkinnyIsa(), GetParam());
  }
  void TearDown() override { ClearSkinnyIsaForTesting(); }
  std::mt19937 Rng() {
    return std::mt19937(static_cast<uint32_t>(xhc::testing::TestSeed(SkinnyIsaName(GetParam()))));
  }
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
  std::mt19937 rng = Rng();
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 5, 17}, Shape{16, 32, 2100}, Shape{7, 36, 1030},
                        Shape{20, 8, 4096}, Shape{5, 7, 263}, Shape{16, 20, 4099},
                        Shape{16, 80, 1030}, Shape{11, 100, 530}}) {  // walks of 2 + 3, 2 + 2 + 3
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
  std::mt19937 rng = Rng();
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 5, 17}, Shape{16, 32, 2100}, Shape{5, 20, 1037},
                        Shape{16, 32, 4096}, Shape{6, 3, 205}}) {
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

// AtXRows (weight gradients): against double products, shapes with ragged row groups (R not a
// multiple of 4), ragged column chunks / tails and token blocks; out's padding untouched.
TEST_P(SkinnyGemmTest, AtXRowsMatchesDouble) {
  std::mt19937 rng = Rng();
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 5, 17}, Shape{40, 32, 2100}, Shape{17, 7, 263},
                        Shape{100, 80, 401}, Shape{16, 28, 192}}) {
    const int n = s.nt, lda = s.R + 1;
    const size_t ldx = s.D + 3, ldo = s.D + 2;
    auto A = Random(static_cast<size_t>(n) * lda, rng), X = Random(n * ldx, rng);
    std::vector<float> out(s.R * ldo, -7.0f);
    AtXRows(n, s.R, s.D, A.data(), lda, X.data(), ldx, out.data(), ldo);
    for (int r = 0; r < s.R; ++r) {
      for (int c = 0; c < s.D; ++c) {
        double ref = 0, mag = 0;
        for (int t = 0; t < n; ++t) {
          ref += double(A[t * lda + r]) * X[t * ldx + c];
          mag += std::fabs(double(A[t * lda + r]) * X[t * ldx + c]);
        }
        ASSERT_NEAR(out[r * ldo + c], ref, SumBound(n, mag)) << r << " " << c << " n=" << n;
      }
      for (size_t c = s.D; c < ldo; ++c) ASSERT_EQ(out[r * ldo + c], -7.0f);
    }
  }
}

// AtXRows' determinism contract: an element's bits do not depend on the column range it is
// computed in (how a caller splits the columns over threads) nor on the number of rows.
TEST_P(SkinnyGemmTest, AtXRowsIndependentOfSplit) {
  std::mt19937 rng = Rng();
  const int n = 75, R = 30, D = 1037;
  auto A = Random(static_cast<size_t>(n) * R, rng), X = Random(static_cast<size_t>(n) * D, rng);
  std::vector<float> whole(static_cast<size_t>(R) * D), split(whole.size(), -1.0f);
  AtXRows(n, R, D, A.data(), R, X.data(), D, whole.data(), D);
  for (int c0 = 0, w = 1; c0 < D; c0 += w, w = w * 3 + 2) {  // ragged pieces: 1, 5, 17, 53, ...
    const int len = std::min(w, D - c0);
    AtXRows(n, R, len, A.data(), R, X.data() + c0, D, split.data() + c0, D);
  }
  ASSERT_EQ(0, std::memcmp(whole.data(), split.data(), sizeof(float) * whole.size()));
  std::vector<float> row(D);
  for (int r = 0; r < R; r += 7) {  // one row alone: A's column r as a 1-row A
    std::vector<float> a1(n);
    for (int t = 0; t < n; ++t) a1[t] = A[t * R + r];
    AtXRows(n, 1, D, a1.data(), 1, X.data(), D, row.data(), D);
    ASSERT_EQ(0,
              std::memcmp(row.data(), whole.data() + static_cast<size_t>(r) * D, sizeof(float) * D))
        << r;
  }
}

// AtXColumns' blocks: one width, a multiple of 16 and at most kAtXColumns, covering D, and at
// the weight passes' widths as many blocks as the threads share evenly
// (docs/design/skinny-gemm-and-isa-dispatch.md).
TEST(AtXColumnsTest, BlocksShareEvenlyOverThreads) {
  for (int threads : {1, 2, 3, 4}) {
    for (int D : {16, 40, 640, 1000, 2048, 4096, 4100, 8192, 16384}) {
      const int width = AtXColumnBlockWidth(D, threads);
      const int blocks = (D + width - 1) / width;
      EXPECT_EQ(width % 16, 0) << D << " " << threads;
      EXPECT_LE(width, std::max(kAtXColumns, 16)) << D << " " << threads;
      EXPECT_GE(blocks * width, D) << D << " " << threads;
      if (D >= 2048) EXPECT_EQ(blocks % threads, 0) << D << " " << threads;
    }
  }
  EXPECT_EQ(AtXColumnBlockWidth(16384, 2), 1024);  // 16 blocks, not 15 of 1152
  EXPECT_EQ(AtXColumnBlockWidth(4096, 2), 1024);   // 4 equal blocks, not 3 x 1152 + 640
}

// AtXRows' sparse_rows: the leading rows, router-like (per token 2 nonzero coefficients, some
// tokens none, zeros of both signs), with zeros skipped give the dense call's bits in every row,
// also where such a row has no zeros at all; R = sparse_rows (no dense rows) and ragged
// shapes included; out's padding untouched.
TEST_P(SkinnyGemmTest, AtXRowsSkippingZerosGivesTheDenseBits) {
  std::mt19937 rng = Rng();
  struct Case {
    int n, R, D, sparse;
  };
  for (const Case s : {Case{75, 32, 1037, 16}, Case{40, 80, 2100, 16}, Case{33, 16, 263, 16},
                       Case{17, 7, 17, 3}, Case{5, 20, 200, 1}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << s.n << " R=" << s.R << " D=" << s.D);
    const int lda = s.R + 1;
    const size_t ldx = s.D + 3, ldo = s.D + 2;
    auto A = Random(static_cast<size_t>(s.n) * lda, rng), X = Random(s.n * ldx, rng);
    for (int t = 0; t < s.n; ++t) {
      float* a = A.data() + static_cast<size_t>(t) * lda;
      const int keep0 = static_cast<int>(rng() % s.sparse);
      const int keep1 = static_cast<int>(rng() % s.sparse);
      for (int r = 0; r < s.sparse; ++r) {
        const bool none = t % 7 == 3, full = s.sparse == 1 && t % 2 == 0;
        if (full || (!none && (r == keep0 || r == keep1))) continue;
        a[r] = (r + t) % 2 ? -0.0f : 0.0f;
      }
    }
    std::vector<float> dense(s.R * ldo, -7.0f), skipping(dense);
    AtXRows(s.n, s.R, s.D, A.data(), lda, X.data(), ldx, dense.data(), ldo);
    AtXRows(s.n, s.R, s.D, A.data(), lda, X.data(), ldx, skipping.data(), ldo, s.sparse);
    ASSERT_EQ(0, std::memcmp(dense.data(), skipping.data(), sizeof(float) * dense.size()));
    for (int r = 0; r < s.R; ++r) {
      for (size_t c = s.D; c < ldo; ++c) ASSERT_EQ(skipping[r * ldo + c], -7.0f) << r;
    }
  }
}

// The determinism contract: a token's outputs do not depend on the block it is computed in
// (its position in the block, the block's size, i.e. the register tile it falls in).
TEST_P(SkinnyGemmTest, TokenResultIndependentOfBlock) {
  std::mt19937 rng = Rng();
  for (const int R : {32, 80}) {  // 80: DotRows' walks of 2 and 3 vectors on AVX-512
    SCOPED_TRACE(R);
    const int D = 1037, nt = 15;
    auto X = Random(static_cast<size_t>(nt) * D, rng), W = Random(static_cast<size_t>(R) * D, rng);
    std::vector<float> block(nt * R), alone(R);
    DotRows(nt, R, D, X.data(), D, W.data(), D, block.data(), R);
    std::vector<float> A(nt * R);
    for (auto& a : A) a = std::normal_distribution<float>()(rng);
    std::vector<float> block_y(static_cast<size_t>(nt) * D), alone_y(D);
    AxpyRows(nt, R, D, A.data(), R, W.data(), D, block_y.data(), D, false);
    for (int t = 0; t < nt; ++t) {
      DotRows(1, R, D, X.data() + static_cast<size_t>(t) * D, D, W.data(), D, alone.data(), R);
      ASSERT_EQ(0, std::memcmp(alone.data(), block.data() + t * R, sizeof(float) * R)) << t;
      AxpyRows(1, R, D, A.data() + t * R, R, W.data(), D, alone_y.data(), D, false);
      ASSERT_EQ(0, std::memcmp(alone_y.data(), block_y.data() + static_cast<size_t>(t) * D,
                               sizeof(float) * D))
          << t;
    }
  }
}

// DotRows with SkinnyWeights (W packed once, as XhcPre uses it) gives the unpacked call's
// results bit for bit, on shapes with ragged chunks and more than 32 rows.
TEST_P(SkinnyGemmTest, PackedWeightsSameAsInPlace) {
  std::mt19937 rng = Rng();
  for (const Shape s :
       {Shape{16, 32, 16384}, Shape{7, 36, 1030}, Shape{3, 5, 17}, Shape{20, 70, 300}}) {
    const size_t ldx = s.D + 3, ldw = s.D + 5;
    auto X = Random(s.nt * ldx, rng), W = Random(s.R * ldw, rng);
    std::vector<float> a(s.nt * s.R), b(s.nt * s.R);
    DotRows(s.nt, s.R, s.D, X.data(), ldx, W.data(), ldw, a.data(), s.R);
    const SkinnyWeights dw = PackForDotRows(s.R, s.D, W.data(), ldw);
    ASSERT_EQ(dw.isa, GetParam());
    DotRows(s.nt, dw, X.data(), ldx, b.data(), s.R);
    ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size())) << "D=" << s.D;
  }
}

// AxpyRows with SkinnyWeights (W packed once in column chunks, as BackwardInput and the head
// use it) gives the unpacked call's results bit for bit, stored and accumulated, on shapes with
// ragged chunks, more tokens than one block and more rows than the per-call pack takes; and
// weights packed for one product, given to the other, are read in place (the same results).
TEST_P(SkinnyGemmTest, AxpyRowsPackedWeightsSameAsInPlace) {
  std::mt19937 rng = Rng();
  for (const Shape s :
       {Shape{16, 16, 16384}, Shape{7, 36, 1030}, Shape{3, 5, 17}, Shape{37, 70, 300}}) {
    const int lda = s.R + 2;
    const size_t ldo = s.D + 3, ldw = s.D + 5;
    const auto A = Random(s.nt * lda, rng), W = Random(s.R * ldw, rng);
    const auto start = Random(s.nt * ldo, rng);
    const SkinnyWeights aw = PackForAxpyRows(s.R, s.D, W.data(), ldw);
    ASSERT_EQ(aw.isa, GetParam());
    for (bool accumulate : {false, true}) {
      std::vector<float> a = start, b = start;
      AxpyRows(s.nt, s.R, s.D, A.data(), lda, W.data(), ldw, a.data(), ldo, accumulate);
      AxpyRows(s.nt, aw, A.data(), lda, b.data(), ldo, accumulate);
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size()))
          << "D=" << s.D << " accumulate=" << accumulate;
      std::vector<float> c = start;
      AxpyRows(s.nt, PackForDotRows(s.R, s.D, W.data(), ldw), A.data(), lda, c.data(), ldo,
               accumulate);
      ASSERT_EQ(0, std::memcmp(a.data(), c.data(), sizeof(float) * a.size())) << "D=" << s.D;
    }
    const auto X = Random(s.nt * ldo, rng);
    std::vector<float> d(s.nt * s.R), e(s.nt * s.R);
    DotRows(s.nt, s.R, s.D, X.data(), ldo, W.data(), ldw, d.data(), s.R);
    DotRows(s.nt, aw, X.data(), ldo, e.data(), s.R);
    ASSERT_EQ(0, std::memcmp(d.data(), e.data(), sizeof(float) * d.size())) << "D=" << s.D;
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, SkinnyGemmTest,
                         ::testing::Values(SkinnyIsa::kAvx512, SkinnyIsa::kAvx2,
                                           SkinnyIsa::kGeneric),
                         [](const auto& info) { return std::string(SkinnyIsaName(info.param)); });

// skinny_gemm_simd.h's claim: the avx2 and avx512 builds of DotRows, AxpyRows and AtXRows give
// the same bits (each element is one FMA chain, or DotRows' runs of them, whatever the vector
// width), on ragged shapes and row counts that split into different walks (avx2 takes up to 4
// vectors of 8 rows per walk, avx512 up to 3 of 16). Needs a CPU with AVX-512 (skipped visibly
// elsewhere).
TEST(SkinnyGemmPathsTest, Avx2AndAvx512AgreeBitForBit) {
  if (!CpuSupportsSkinnyIsa(SkinnyIsa::kAvx512)) {
    GTEST_SKIP() << "CPU lacks avx512 (supports " << CpuSkinnyIsas() << ")";
  }
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed("avx2-avx512")));
  for (const Shape s :
       {Shape{16, 32, 2100}, Shape{5, 20, 1037}, Shape{3, 7, 17}, Shape{13, 80, 600}}) {
    const int lda = s.R + 1;
    const size_t ld = s.D + 3;
    auto A = Random(s.nt * lda, rng), W = Random(s.R * ld, rng), X = Random(s.nt * ld, rng);
    const auto start = Random(s.nt * ld, rng);
    std::vector<float> y[2] = {start, start}, g[2], d[2];
    const SkinnyIsa paths[2] = {SkinnyIsa::kAvx2, SkinnyIsa::kAvx512};
    for (int p = 0; p < 2; ++p) {
      ASSERT_TRUE(SetSkinnyIsaForTesting(paths[p]).ok());
      d[p].assign(s.nt * s.R, 0.0f);
      DotRows(s.nt, PackForDotRows(s.R, s.D, W.data(), ld), X.data(), ld, d[p].data(), s.R);
      AxpyRows(s.nt, PackForAxpyRows(s.R, s.D, W.data(), ld), A.data(), lda, y[p].data(), ld, true);
      g[p].assign(s.R * ld, 0.0f);
      AtXRows(s.nt, s.R, s.D, A.data(), lda, X.data(), ld, g[p].data(), ld);
    }
    ClearSkinnyIsaForTesting();
    ASSERT_EQ(0, std::memcmp(y[0].data(), y[1].data(), sizeof(float) * y[0].size())) << s.D;
    ASSERT_EQ(0, std::memcmp(g[0].data(), g[1].data(), sizeof(float) * g[0].size())) << s.D;
    ASSERT_EQ(0, std::memcmp(d[0].data(), d[1].data(), sizeof(float) * d[0].size())) << s.D;
  }
}

// XHC_CPU_ISA: each name selects its path where the CPU has it, and is an error naming the
// variable and the supported set where it does not; unknown names are errors too.
TEST(SkinnyIsaTest, EnvironmentSelectsOrFailsClearly) {
  const char* saved = getenv("XHC_CPU_ISA");
  const std::string saved_value = saved ? saved : "";
  for (SkinnyIsa isa : {SkinnyIsa::kAvx512, SkinnyIsa::kAvx2, SkinnyIsa::kGeneric}) {
    setenv("XHC_CPU_ISA", SkinnyIsaName(isa), 1);
    const auto got = SkinnyIsaFromEnv();
    if (CpuSupportsSkinnyIsa(isa)) {
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(*got, isa);
    } else {
      ASSERT_FALSE(got.ok());
      EXPECT_NE(got.status().message().find("XHC_CPU_ISA"), std::string::npos) << got.status();
      EXPECT_NE(got.status().message().find(CpuSkinnyIsas()), std::string::npos) << got.status();
    }
  }
  setenv("XHC_CPU_ISA", "sse9", 1);
  const auto bad = SkinnyIsaFromEnv();
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("XHC_CPU_ISA=sse9"), std::string::npos) << bad.status();
  unsetenv("XHC_CPU_ISA");
  const auto best = SkinnyIsaFromEnv();
  ASSERT_TRUE(best.ok());
  EXPECT_EQ(SkinnyIsaName(*best), CpuSkinnyIsas().substr(0, CpuSkinnyIsas().find(',')));
  if (saved) setenv("XHC_CPU_ISA", saved_value.c_str(), 1);
}

}  // namespace
}  // namespace xhc::kernels::cpu
