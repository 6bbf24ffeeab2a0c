#include "kernels/cpu/nn/matmul.h"

#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn/matmul_ref.h"
#include "kernels/cpu/nn/test_util.h"

namespace xhc::nn {
namespace {

using testing::random_vec;
using testing::to_double;

struct Shape {
  int M, K, N;
};

class MatmulVsRef : public ::testing::TestWithParam<Shape> {};

TEST_P(MatmulVsRef, AllThreeMatchDoubleReference) {
  const auto [M, K, N] = GetParam();
  const auto x = random_vec(M * K, 101 + M), w = random_vec(N * K, 202 + N),
             dy = random_vec(M * N, 303 + K), dx0 = random_vec(M * K, 404),
             dw0 = random_vec(N * K, 505);
  std::vector<float> y(M * N), dx(M * K), dxa = dx0, dw = dw0;
  XHC_EXPECT_OK(MatmulForward(y.data(), x.data(), w.data(), M, K, N));
  XHC_EXPECT_OK(MatmulBackwardInput(dx.data(), dy.data(), w.data(), M, K, N));
  XHC_EXPECT_OK(MatmulBackwardInput(dxa.data(), dy.data(), w.data(), M, K, N, /*accumulate=*/true));
  XHC_EXPECT_OK(MatmulBackwardWeight(dw.data(), dy.data(), x.data(), M, K, N));

  const auto xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  std::vector<double> ry(M * N), rdx(M * K), rdxa = to_double(dx0), rdw = to_double(dw0);
  XHC_EXPECT_OK(ref::MatmulForward(ry.data(), xd.data(), wd.data(), M, K, N));
  XHC_EXPECT_OK(ref::MatmulBackwardInput(rdx.data(), dyd.data(), wd.data(), M, K, N));
  XHC_EXPECT_OK(ref::MatmulBackwardInput(rdxa.data(), dyd.data(), wd.data(), M, K, N, true));
  XHC_EXPECT_OK(ref::MatmulBackwardWeight(rdw.data(), dyd.data(), xd.data(), M, K, N));
  testing::expect_close(y, ry, 1e-4, 1e-4, "y");
  testing::expect_close(dx, rdx, 1e-4, 1e-4, "dx");
  testing::expect_close(dxa, rdxa, 1e-4, 1e-4, "dx accumulated");
  testing::expect_close(dw, rdw, 1e-4, 1e-4, "dw");
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulVsRef,
                         ::testing::Values(Shape{1, 1, 1}, Shape{1, 37, 5}, Shape{7, 13, 5},
                                           Shape{33, 64, 17}, Shape{130, 256, 96},
                                           Shape{256, 512, 512}));

TEST(MatmulRef, GradientsMatchFiniteDifferences) {
  const int M = 3, K = 5, N = 4;
  auto x = to_double(random_vec(M * K, 11)), w = to_double(random_vec(N * K, 12));
  const auto dy = to_double(random_vec(M * N, 13));
  std::vector<double> y(M * N), dx(M * K), dw(N * K, 0.0);
  auto loss = [&] {
    XHC_EXPECT_OK(ref::MatmulForward(y.data(), x.data(), w.data(), M, K, N));
    return testing::dot(dy, y);
  };
  XHC_EXPECT_OK(ref::MatmulBackwardInput(dx.data(), dy.data(), w.data(), M, K, N));
  XHC_EXPECT_OK(ref::MatmulBackwardWeight(dw.data(), dy.data(), x.data(), M, K, N));
  testing::check_fd(x, dx, loss, "dx");
  testing::check_fd(w, dw, loss, "dw");
}

TEST(Matmul, BitIdenticalAcrossThreadCounts) {
  const int M = 200, K = 136, N = 72;
  const auto x = random_vec(M * K, 21), w = random_vec(N * K, 22), dy = random_vec(M * N, 23);
  auto run = [&](int threads) {
    std::vector<float> y(M * N), dx(M * K), dw(N * K, 0.5f);
    testing::with_threads(threads, [&] {
      XHC_EXPECT_OK(MatmulForward(y.data(), x.data(), w.data(), M, K, N));
      XHC_EXPECT_OK(MatmulBackwardInput(dx.data(), dy.data(), w.data(), M, K, N));
      XHC_EXPECT_OK(MatmulBackwardWeight(dw.data(), dy.data(), x.data(), M, K, N));
    });
    return std::make_tuple(y, dx, dw);
  };
  const auto [y1, dx1, dw1] = run(1);
  const auto [y2, dx2, dw2] = run(2);
  testing::expect_bitwise_equal(y1, y2, "y");
  testing::expect_bitwise_equal(dx1, dx2, "dx");
  testing::expect_bitwise_equal(dw1, dw2, "dw");
}

}  // namespace
}  // namespace xhc::nn
