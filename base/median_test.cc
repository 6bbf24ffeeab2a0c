#include "base/median.h"

#include "gtest/gtest.h"

namespace xhc {
namespace {

TEST(Median, MiddleValueUpperForEvenCountsZeroForNone) {
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_EQ(Median({3.0}), 3.0);
  EXPECT_EQ(Median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 3.0);  // the larger middle value, not 2.5
}

}  // namespace
}  // namespace xhc
