#include "kernels/cpu/nn/rmsnorm.h"

#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn/rmsnorm_ref.h"
#include "kernels/cpu/nn/test_util.h"

namespace xhc::nn {
namespace {

using testing::random_vec;
using testing::to_double;

struct Outputs {
  std::vector<float> y, rstd, dx, dw;
};

Outputs run_opt(const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& dy, int R, int C) {
  Outputs o{std::vector<float>(R * C), std::vector<float>(R), std::vector<float>(R * C),
            std::vector<float>(C, 0.25f)};
  XHC_EXPECT_OK(RmsnormForward(o.y.data(), o.rstd.data(), x.data(), w.data(), R, C, 1e-6f));
  XHC_EXPECT_OK(
      RmsnormBackwardInput(o.dx.data(), dy.data(), x.data(), w.data(), o.rstd.data(), R, C));
  XHC_EXPECT_OK(RmsnormBackwardWeight(o.dw.data(), dy.data(), x.data(), o.rstd.data(), R, C));
  return o;
}

class RmsnormVsRef : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RmsnormVsRef, MatchesDoubleReference) {
  const auto [R, C] = GetParam();
  const auto x = random_vec(R * C, 31 + R), w = random_vec(C, 32 + C, 0.5f, 1.5f),
             dy = random_vec(R * C, 33);
  const Outputs o = run_opt(x, w, dy, R, C);
  const auto xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  std::vector<double> y(R * C), rstd(R), dx(R * C), dw(C, 0.25);
  XHC_EXPECT_OK(ref::RmsnormForward(y.data(), rstd.data(), xd.data(), wd.data(), R, C, 1e-6));
  XHC_EXPECT_OK(
      ref::RmsnormBackwardInput(dx.data(), dyd.data(), xd.data(), wd.data(), rstd.data(), R, C));
  XHC_EXPECT_OK(ref::RmsnormBackwardWeight(dw.data(), dyd.data(), xd.data(), rstd.data(), R, C));
  testing::expect_close(o.y, y, 1e-5, 1e-5, "y");
  testing::expect_close(o.rstd, rstd, 1e-5, 1e-5, "rstd");
  testing::expect_close(o.dx, dx, 1e-4, 1e-5, "dx");
  testing::expect_close(o.dw, dw, 1e-4, 1e-4, "dw");
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsnormVsRef,
                         ::testing::Values(std::make_tuple(1, 1), std::make_tuple(1, 7),
                                           std::make_tuple(5, 13), std::make_tuple(67, 130),
                                           std::make_tuple(300, 512)));

TEST(RmsnormRef, GradientsMatchFiniteDifferences) {
  const int R = 3, C = 7;
  auto x = to_double(random_vec(R * C, 41)), w = to_double(random_vec(C, 42, 0.5f, 1.5f));
  const auto dy = to_double(random_vec(R * C, 43));
  std::vector<double> y(R * C), rstd(R), dx(R * C), dw(C, 0.0);
  auto loss = [&] {
    XHC_EXPECT_OK(ref::RmsnormForward(y.data(), rstd.data(), x.data(), w.data(), R, C, 1e-6));
    return testing::dot(dy, y);
  };
  loss();
  XHC_EXPECT_OK(
      ref::RmsnormBackwardInput(dx.data(), dy.data(), x.data(), w.data(), rstd.data(), R, C));
  XHC_EXPECT_OK(ref::RmsnormBackwardWeight(dw.data(), dy.data(), x.data(), rstd.data(), R, C));
  testing::check_fd(x, dx, loss, "dx");
  testing::check_fd(w, dw, loss, "dw");
}

TEST(Rmsnorm, BitIdenticalAcrossThreadCounts) {
  const int R = 203, C = 200;
  const auto x = random_vec(R * C, 51), w = random_vec(C, 52), dy = random_vec(R * C, 53);
  Outputs a, b;
  testing::with_threads(1, [&] { a = run_opt(x, w, dy, R, C); });
  testing::with_threads(2, [&] { b = run_opt(x, w, dy, R, C); });
  testing::expect_bitwise_equal(a.y, b.y, "y");
  testing::expect_bitwise_equal(a.rstd, b.rstd, "rstd");
  testing::expect_bitwise_equal(a.dx, b.dx, "dx");
  testing::expect_bitwise_equal(a.dw, b.dw, "dw");
}

}  // namespace
}  // namespace xhc::nn
