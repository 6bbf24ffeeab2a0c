#include "kernels/cpu/nn/rope.h"

#include <cmath>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn/rope_ref.h"
#include "kernels/cpu/nn/test_util.h"

namespace xhc::nn {
namespace {

using testing::random_vec;
using testing::to_double;

class RopeVsRef : public ::testing::TestWithParam<std::tuple<int, int, int, int>> {};

TEST_P(RopeVsRef, ForwardAndBackwardMatchDoubleReference) {
  const auto [B, T, H, dh] = GetParam();
  const int n = B * T * H * dh;
  const auto x = random_vec(n, 61 + T), dout = random_vec(n, 62 + H);
  std::vector<float> y(n), dx(n), inplace = x;
  XHC_EXPECT_OK(RopeForward(y.data(), x.data(), B, T, H, dh, 10000.0f));
  XHC_EXPECT_OK(RopeBackward(dx.data(), dout.data(), B, T, H, dh, 10000.0f));
  XHC_EXPECT_OK(RopeForward(inplace.data(), inplace.data(), B, T, H, dh, 10000.0f));
  const auto xd = to_double(x), doutd = to_double(dout);
  std::vector<double> ry(n), rdx(n);
  XHC_EXPECT_OK(ref::RopeForward(ry.data(), xd.data(), B, T, H, dh, 10000.0));
  XHC_EXPECT_OK(ref::RopeBackward(rdx.data(), doutd.data(), B, T, H, dh, 10000.0));
  testing::expect_close(y, ry, 1e-5, 1e-5, "y");
  testing::expect_close(dx, rdx, 1e-5, 1e-5, "dx");
  testing::expect_bitwise_equal(inplace, y, "in-place y");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeVsRef,
                         ::testing::Values(std::make_tuple(1, 1, 1, 2), std::make_tuple(2, 5, 3, 6),
                                           std::make_tuple(3, 17, 2, 64),
                                           std::make_tuple(2, 300, 4, 128)));

// Position 0 is the identity; position 1 of the first pair rotates by exactly 1 radian.
TEST(RopeRef, HalfSplitConvention) {
  const int dh = 4;
  std::vector<double> x = {1, 2, 3, 4, 1, 2, 3, 4}, y(8);
  XHC_EXPECT_OK(ref::RopeForward(y.data(), x.data(), 1, 2, 1, dh, 10000.0));
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(y[i], x[i]);
  // j = 0 pairs x[0] with x[2] (half split, not interleaved), angle = 1.
  EXPECT_NEAR(y[4], 1 * std::cos(1.0) - 3 * std::sin(1.0), 1e-15);
  EXPECT_NEAR(y[6], 1 * std::sin(1.0) + 3 * std::cos(1.0), 1e-15);
  // j = 1: angle = 1 · 10000^(−2/4) = 0.01.
  EXPECT_NEAR(y[5], 2 * std::cos(0.01) - 4 * std::sin(0.01), 1e-15);
  EXPECT_NEAR(y[7], 2 * std::sin(0.01) + 4 * std::cos(0.01), 1e-15);
}

TEST(RopeRef, GradientMatchesFiniteDifferences) {
  const int B = 2, T = 3, H = 2, dh = 4, n = B * T * H * dh;
  auto x = to_double(random_vec(n, 71));
  const auto dy = to_double(random_vec(n, 72));
  std::vector<double> y(n), dx(n);
  auto loss = [&] {
    XHC_EXPECT_OK(ref::RopeForward(y.data(), x.data(), B, T, H, dh, 500.0));
    return testing::dot(dy, y);
  };
  XHC_EXPECT_OK(ref::RopeBackward(dx.data(), dy.data(), B, T, H, dh, 500.0));
  testing::check_fd(x, dx, loss, "dx");
}

TEST(Rope, BitIdenticalAcrossThreadCounts) {
  const int B = 3, T = 37, H = 3, dh = 32, n = B * T * H * dh;
  const auto x = random_vec(n, 81);
  std::vector<float> a(n), b(n), da(n), db(n);
  testing::with_threads(1, [&] {
    XHC_EXPECT_OK(RopeForward(a.data(), x.data(), B, T, H, dh, 10000.0f));
    XHC_EXPECT_OK(RopeBackward(da.data(), x.data(), B, T, H, dh, 10000.0f));
  });
  testing::with_threads(2, [&] {
    XHC_EXPECT_OK(RopeForward(b.data(), x.data(), B, T, H, dh, 10000.0f));
    XHC_EXPECT_OK(RopeBackward(db.data(), x.data(), B, T, H, dh, 10000.0f));
  });
  testing::expect_bitwise_equal(a, b, "y");
  testing::expect_bitwise_equal(da, db, "dx");
}

}  // namespace
}  // namespace xhc::nn
