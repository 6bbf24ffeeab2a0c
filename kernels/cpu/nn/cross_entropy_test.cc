#include "kernels/cpu/nn/cross_entropy.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn/cross_entropy_ref.h"
#include "kernels/cpu/nn/test_util.h"

namespace xhc::nn {
namespace {

using testing::random_vec;
using testing::to_double;

std::vector<int32_t> random_targets(int R, int V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(R);
  for (auto& x : t) x = static_cast<int32_t>(rng() % V);
  return t;
}

class CrossEntropyVsRef : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CrossEntropyVsRef, MatchesDoubleReference) {
  const auto [R, V] = GetParam();
  const auto logits = random_vec(R * V, 151 + R, -8.0f, 8.0f);
  const auto targets = random_targets(R, V, 152 + V);
  std::vector<float> lse(R), dl(R * V);
  float loss = 0;
  XHC_EXPECT_OK(CrossEntropyForward(&loss, lse.data(), logits.data(), targets.data(), R, V));
  XHC_EXPECT_OK(
      CrossEntropyBackward(dl.data(), logits.data(), lse.data(), targets.data(), R, V, 0.25f));
  const auto ld = to_double(logits);
  std::vector<double> rlse(R), rdl(R * V);
  double rloss = 0;
  XHC_EXPECT_OK(ref::CrossEntropyForward(&rloss, rlse.data(), ld.data(), targets.data(), R, V));
  XHC_EXPECT_OK(
      ref::CrossEntropyBackward(rdl.data(), ld.data(), rlse.data(), targets.data(), R, V, 0.25));
  EXPECT_NEAR(loss, rloss, 1e-5 * (1 + std::fabs(rloss)));
  testing::expect_close(lse, rlse, 1e-6, 1e-5, "lse");
  testing::expect_close(dl, rdl, 1e-4, 1e-8, "dlogits");
}

INSTANTIATE_TEST_SUITE_P(Shapes, CrossEntropyVsRef,
                         ::testing::Values(std::make_tuple(1, 1), std::make_tuple(1, 3),
                                           std::make_tuple(9, 17), std::make_tuple(1024, 256)));

TEST(CrossEntropyRef, UniformLogitsGiveLogV) {
  std::vector<double> logits(2 * 5, 0.3), lse(2);
  const std::vector<int32_t> targets = {1, 4};
  double loss = 0;
  XHC_EXPECT_OK(ref::CrossEntropyForward(&loss, lse.data(), logits.data(), targets.data(), 2, 5));
  EXPECT_NEAR(loss, std::log(5.0), 1e-14);
}

TEST(CrossEntropyRef, GradientMatchesFiniteDifferences) {
  const int R = 3, V = 6;
  auto logits = to_double(random_vec(R * V, 161, -3.0f, 3.0f));
  const auto targets = random_targets(R, V, 162);
  std::vector<double> lse(R), dl(R * V);
  auto loss = [&] {
    double l = 0;
    XHC_EXPECT_OK(ref::CrossEntropyForward(&l, lse.data(), logits.data(), targets.data(), R, V));
    return l;
  };
  loss();
  XHC_EXPECT_OK(
      ref::CrossEntropyBackward(dl.data(), logits.data(), lse.data(), targets.data(), R, V, 1.0));
  testing::check_fd(logits, dl, loss, "dlogits");
}

TEST(CrossEntropy, BitIdenticalAcrossThreadCounts) {
  const int R = 301, V = 77;
  const auto logits = random_vec(R * V, 171, -5.0f, 5.0f);
  const auto targets = random_targets(R, V, 172);
  std::vector<float> l1(R), l2(R), d1(R * V), d2(R * V);
  float loss1 = 0, loss2 = 0;
  testing::with_threads(1, [&] {
    XHC_EXPECT_OK(CrossEntropyForward(&loss1, l1.data(), logits.data(), targets.data(), R, V));
    XHC_EXPECT_OK(
        CrossEntropyBackward(d1.data(), logits.data(), l1.data(), targets.data(), R, V, 1.0f));
  });
  testing::with_threads(2, [&] {
    XHC_EXPECT_OK(CrossEntropyForward(&loss2, l2.data(), logits.data(), targets.data(), R, V));
    XHC_EXPECT_OK(
        CrossEntropyBackward(d2.data(), logits.data(), l2.data(), targets.data(), R, V, 1.0f));
  });
  EXPECT_EQ(0, std::memcmp(&loss1, &loss2, sizeof(float)));
  testing::expect_bitwise_equal(l1, l2, "lse");
  testing::expect_bitwise_equal(d1, d2, "dlogits");
}

}  // namespace
}  // namespace xhc::nn
