// Axes that fit their data: the ranges and ticks the study's and the ablation's charts get.
#include "runtime/lab/study/axis.h"

#include <vector>

#include "gtest/gtest.h"

namespace xhc::study {
namespace {

TEST(Axis, BarsStartAtZero) {
  const AxisTicks t = AxisFromZero(3.9);
  EXPECT_EQ(t.lo, 0);
  EXPECT_EQ(t.hi, 4);
  EXPECT_EQ(t.count(), 4);
  EXPECT_EQ(t.Label(0), "0");
}

TEST(Axis, FitCoversTheDataNotZero) {
  const AxisTicks t = AxisFit(2.03, 2.27);
  EXPECT_DOUBLE_EQ(t.lo, 2.0);
  EXPECT_NEAR(t.hi, 2.3, 1e-12);
  EXPECT_EQ(t.Label(0), "2.00");
  EXPECT_EQ(t.Label(t.count()), "2.30");
  EXPECT_NEAR(t.Fraction(2.15), 0.5, 1e-9);
}

TEST(Axis, OneValueGetsARangeAroundIt) {
  const AxisTicks t = AxisFit(0.5, 0.5);
  EXPECT_LT(t.lo, 0.5);
  EXPECT_GT(t.hi, 0.5);
  EXPECT_GT(t.count(), 0);
}

TEST(Axis, LogAxisTicksDecades) {
  const AxisTicks t = LogAxis(0.3, 40);
  EXPECT_TRUE(t.log);
  EXPECT_DOUBLE_EQ(t.lo, 0.1);
  EXPECT_DOUBLE_EQ(t.hi, 100);
  EXPECT_EQ(t.count(), 3);
  EXPECT_EQ(t.Label(1), "1");
  EXPECT_EQ(t.Label(3), "100");
  EXPECT_NEAR(t.Fraction(10), 2.0 / 3, 1e-12);
}

// A loss curve: 5.5 at the start, then down to about 2 where the variants differ by 0.1.
Curve Loss(double end, double x_max) {
  Curve c = {{0, 5.5}};
  for (int i = 1; i <= 10; ++i) c.push_back({x_max * i / 10, end + 0.5 / i});
  return c;
}

TEST(Axis, CurvesYRangeLeavesOutTheFirstDrop) {
  const auto [lo, hi] = CurveYRange({Loss(2.0, 100), Loss(2.1, 100)});
  EXPECT_LT(lo, 2.05);
  EXPECT_GT(lo, 1.9);
  EXPECT_LT(hi, 2.8) << "the initial 5.5 must not set the range";
  EXPECT_GT(hi, 2.5) << "the curves after their first tenth must fit";
}

TEST(Axis, ACurveTenTimesLongerMakesXLogarithmic) {
  EXPECT_TRUE(CurvesWantLogX({Loss(2.0, 10), Loss(2.1, 100)}));
  EXPECT_FALSE(CurvesWantLogX({Loss(2.0, 10), Loss(2.1, 20)}));
  Curve empty;
  EXPECT_FALSE(CurvesWantLogX({empty, Loss(2.0, 10)}));
}

}  // namespace
}  // namespace xhc::study
