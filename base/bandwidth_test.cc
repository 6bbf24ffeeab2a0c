#include "base/bandwidth.h"

#include "gtest/gtest.h"

namespace xhc {
namespace {

TEST(BandwidthTest, ParsesTcUnits) {
  EXPECT_EQ(*ParseBandwidth("1gbit", "k"), 1'000'000'000);
  EXPECT_EQ(*ParseBandwidth("200Mbit/s", "k"), 200'000'000);
  EXPECT_EQ(*ParseBandwidth(" 2.5 GBIT ", "k"), 2'500'000'000);
  EXPECT_EQ(*ParseBandwidth("1500kbit", "k"), 1'500'000);
  EXPECT_EQ(*ParseBandwidth("", "k"), 0);
  EXPECT_EQ(*ParseBandwidth("off", "k"), 0);
}

TEST(BandwidthTest, RefusalsNameTheKey) {
  for (const char* bad : {"1g", "fast", "gbit", "10", "-1gbit", "nanmbit"}) {
    absl::StatusOr<int64_t> r = ParseBandwidth(bad, "pipeline.link.bandwidth");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("pipeline.link.bandwidth"), std::string::npos);
  }
  EXPECT_NE(ParseBandwidth("500kbit", "--link-bandwidth").status().message().find("below"),
            std::string::npos);
  EXPECT_NE(ParseBandwidth("200gbit", "--link-bandwidth").status().message().find("above"),
            std::string::npos);
}

TEST(BandwidthTest, Formats) {
  EXPECT_EQ(FormatBandwidth(1'000'000'000), "1 Gbit/s");
  EXPECT_EQ(FormatBandwidth(200'000'000), "200 Mbit/s");
  EXPECT_EQ(FormatBandwidth(2'500'000'000), "2.5 Gbit/s");
}

}  // namespace
}  // namespace xhc
