#include "kernels/cpu/nn/swiglu.h"

#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/nn/swiglu_ref.h"
#include "kernels/cpu/nn/test_util.h"

namespace xhc::nn {
namespace {

using testing::random_vec;
using testing::to_double;

class SwigluVsRef : public ::testing::TestWithParam<int> {};

TEST_P(SwigluVsRef, MatchesDoubleReference) {
  const int n = GetParam();
  const auto a = random_vec(n, 91 + n, -6.0f, 6.0f), b = random_vec(n, 92), dh = random_vec(n, 93);
  std::vector<float> h(n), da(n), db(n);
  XHC_EXPECT_OK(SwigluForward(h.data(), a.data(), b.data(), n));
  XHC_EXPECT_OK(SwigluBackward(da.data(), db.data(), dh.data(), a.data(), b.data(), n));
  const auto ad = to_double(a), bd = to_double(b), dhd = to_double(dh);
  std::vector<double> rh(n), rda(n), rdb(n);
  XHC_EXPECT_OK(ref::SwigluForward(rh.data(), ad.data(), bd.data(), n));
  XHC_EXPECT_OK(ref::SwigluBackward(rda.data(), rdb.data(), dhd.data(), ad.data(), bd.data(), n));
  testing::expect_close(h, rh, 1e-5, 1e-6, "h");
  testing::expect_close(da, rda, 1e-5, 1e-6, "da");
  testing::expect_close(db, rdb, 1e-5, 1e-6, "db");
}

INSTANTIATE_TEST_SUITE_P(Sizes, SwigluVsRef, ::testing::Values(1, 7, 129, 100003));

TEST(SwigluRef, GradientsMatchFiniteDifferences) {
  const int n = 11;
  auto a = to_double(random_vec(n, 94, -4.0f, 4.0f)), b = to_double(random_vec(n, 95));
  const auto dh = to_double(random_vec(n, 96));
  std::vector<double> h(n), da(n), db(n);
  auto loss = [&] {
    XHC_EXPECT_OK(ref::SwigluForward(h.data(), a.data(), b.data(), n));
    return testing::dot(dh, h);
  };
  XHC_EXPECT_OK(ref::SwigluBackward(da.data(), db.data(), dh.data(), a.data(), b.data(), n));
  testing::check_fd(a, da, loss, "da");
  testing::check_fd(b, db, loss, "db");
}

TEST(Swiglu, BitIdenticalAcrossThreadCounts) {
  const int n = 70001;
  const auto a = random_vec(n, 97, -5.0f, 5.0f), b = random_vec(n, 98), dh = random_vec(n, 99);
  std::vector<float> h1(n), h2(n), da1(n), da2(n), db1(n), db2(n);
  testing::with_threads(1, [&] {
    XHC_EXPECT_OK(SwigluForward(h1.data(), a.data(), b.data(), n));
    XHC_EXPECT_OK(SwigluBackward(da1.data(), db1.data(), dh.data(), a.data(), b.data(), n));
  });
  testing::with_threads(2, [&] {
    XHC_EXPECT_OK(SwigluForward(h2.data(), a.data(), b.data(), n));
    XHC_EXPECT_OK(SwigluBackward(da2.data(), db2.data(), dh.data(), a.data(), b.data(), n));
  });
  testing::expect_bitwise_equal(h1, h2, "h");
  testing::expect_bitwise_equal(da1, da2, "da");
  testing::expect_bitwise_equal(db1, db2, "db");
}

}  // namespace
}  // namespace xhc::nn
