#include "kernels/cpu/nn/adamw.h"

#include <cmath>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn/adamw_ref.h"
#include "kernels/cpu/nn/test_util.h"

namespace xhc::nn {
namespace {

using testing::random_vec;

// One element, two steps, worked by hand with the spec defaults.
TEST(AdamW, MatchesHandComputedSteps) {
  float p = 1.0f, m = 0.0f, v = 0.0f;
  const float g = 0.5f, lr = 0.01f;
  // Step 1: decay 1 − 0.01·0.1 = 0.999; m = 0.05, v = 0.0125; m̂ = 0.5, v̂ = 0.25;
  // update = 0.5 / (0.5 + 1e-8) ≈ 1 − 2e-8 -> p = 0.999 − 0.01·(1 − 2e-8).
  XHC_EXPECT_OK(AdamwStep(&p, &g, &m, &v, 1, 1, lr, /*decay=*/true));
  EXPECT_FLOAT_EQ(m, 0.05f);
  EXPECT_FLOAT_EQ(v, 0.0125f);
  EXPECT_NEAR(p, 0.989, 1e-7);
  // Step 2 without decay, gradient halved by grad_scale: g = 0.25.
  // m = 0.045 + 0.025 = 0.07, v = 0.011875 + 0.003125 = 0.015;
  // m̂ = 0.07/0.19, v̂ = 0.015/0.0975.
  XHC_EXPECT_OK(AdamwStep(&p, &g, &m, &v, 1, 2, lr, /*decay=*/false, /*grad_scale=*/0.5f));
  EXPECT_FLOAT_EQ(m, 0.07f);
  EXPECT_FLOAT_EQ(v, 0.015f);
  const double expected = 0.989 - 0.01 * (0.07 / 0.19) / (std::sqrt(0.015 / 0.0975) + 1e-8);
  EXPECT_NEAR(p, expected, 2e-7);
}

TEST(AdamW, MatchesReferenceOverSeveralSteps) {
  const int n = 1001;
  auto p = random_vec(n, 181), m = std::vector<float>(n, 0.0f), v = m;
  std::vector<double> rp(p.begin(), p.end()), rm(n, 0.0), rv(n, 0.0);
  for (int step = 1; step <= 5; ++step) {
    const auto g = random_vec(n, 190 + step);
    const std::vector<double> gd(g.begin(), g.end());
    const bool decay = step % 2 == 1;
    XHC_EXPECT_OK(AdamwStep(p.data(), g.data(), m.data(), v.data(), n, step, 3e-3f, decay, 0.7f));
    XHC_EXPECT_OK(ref::AdamwStep(rp.data(), gd.data(), rm.data(), rv.data(), n, step, 3e-3, 0.9,
                                 0.95, 1e-8, 0.1, decay, 0.7));
  }
  testing::expect_close(p, rp, 1e-5, 1e-6, "param");
  testing::expect_close(m, rm, 1e-5, 1e-7, "exp_avg");
  testing::expect_close(v, rv, 1e-5, 1e-8, "exp_avg_sq");
}

TEST(LrSchedule, Endpoints) {
  const float peak = 6e-4f;
  EXPECT_FLOAT_EQ(LrAt(0, 10, 100, peak), peak / 10);
  EXPECT_FLOAT_EQ(LrAt(4, 10, 100, peak), peak * 5 / 10);
  EXPECT_FLOAT_EQ(LrAt(9, 10, 100, peak), peak);
  EXPECT_FLOAT_EQ(LrAt(10, 10, 100, peak), peak);
  EXPECT_FLOAT_EQ(LrAt(55, 10, 100, peak), 0.55f * peak);  // cosine midpoint
  EXPECT_FLOAT_EQ(LrAt(100, 10, 100, peak), 0.1f * peak);
  EXPECT_FLOAT_EQ(LrAt(500, 10, 100, peak), 0.1f * peak);
  EXPECT_FLOAT_EQ(LrAt(0, 0, 100, peak), peak);  // no warm-up
  for (int s = 11; s <= 100; ++s) EXPECT_LE(LrAt(s, 10, 100, peak), LrAt(s - 1, 10, 100, peak));
}

TEST(GradNorm, SumsInDoubleAndClips) {
  const std::vector<float> a = {3.0f, 4.0f}, b = {12.0f};
  const std::span<const float> parts[] = {a, b};
  EXPECT_DOUBLE_EQ(GlobalGradNorm(parts), 13.0);
  EXPECT_FLOAT_EQ(ClipCoefficient(13.0), static_cast<float>(1.0 / (13.0 + 1e-6)));
  EXPECT_EQ(ClipCoefficient(0.5), 1.0f);
  const auto big = random_vec(100000, 201);
  double want = 0;
  for (float x : big) want += double{x} * x;
  EXPECT_NEAR(SumOfSquares(big.data(), big.size()), want, 1e-9 * want);
}

TEST(AdamW, BitIdenticalAcrossThreadCounts) {
  const int n = 50001;
  const auto g = random_vec(n, 211), p0 = random_vec(n, 212);
  auto run = [&](int threads, double& norm) {
    std::vector<float> p = p0, m(n, 0.1f), v(n, 0.2f);
    testing::with_threads(threads, [&] {
      norm = SumOfSquares(g.data(), n);
      XHC_EXPECT_OK(AdamwStep(p.data(), g.data(), m.data(), v.data(), n, 3, 1e-3f, true, 0.9f));
    });
    return p;
  };
  double n1 = 0, n2 = 0;
  const auto p1 = run(1, n1), p2 = run(2, n2);
  EXPECT_EQ(0, std::memcmp(&n1, &n2, sizeof(double)));
  testing::expect_bitwise_equal(p1, p2, "param");
}

}  // namespace
}  // namespace xhc::nn
