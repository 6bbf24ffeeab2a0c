#include "runtime/control/cli/flags.h"

#include "gtest/gtest.h"

namespace xhc {
namespace {

const std::vector<FlagSpec> kSpecs = {
    {"config", "c", false, true}, {"steps", "s"}, {"resume", "r", true, false}};

TEST(Flags, ParsesBothFormsAndBooleans) {
  absl::StatusOr<Flags> f =
      Flags::Parse({"--config", "a.yaml", "--steps=5", "--resume", "x"}, kSpecs);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->Get("config"), "a.yaml");
  EXPECT_EQ(*f->GetInt("steps", 0), 5);
  EXPECT_TRUE(f->GetBool("resume"));
  EXPECT_EQ(f->positional(), std::vector<std::string>{"x"});
}

TEST(Flags, ErrorsNameTheFlag) {
  absl::StatusOr<Flags> unknown = Flags::Parse({"--config", "a", "--step", "3"}, kSpecs);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message()).find("--step"), std::string::npos);
  absl::StatusOr<Flags> missing = Flags::Parse({"--steps", "3"}, kSpecs);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("--config"), std::string::npos);
  absl::StatusOr<Flags> novalue = Flags::Parse({"--config"}, kSpecs);
  EXPECT_FALSE(novalue.ok());
  absl::StatusOr<Flags> f = Flags::Parse({"--config", "a", "--steps", "x1"}, kSpecs);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->GetInt("steps", 0).ok());
}

TEST(Flags, CountsBelowTheirMinimumNameTheFlag) {
  const std::vector<FlagSpec> specs = {{"steps", "steps"}, {"rank-hint", "rank"}};
  absl::StatusOr<Flags> f = Flags::Parse({"--steps", "-3", "--rank-hint", "0"}, specs);
  ASSERT_TRUE(f.ok()) << f.status();
  absl::StatusOr<int64_t> steps = f->GetCount("steps", -1);
  ASSERT_FALSE(steps.ok());
  EXPECT_EQ(steps.status().message(), "--steps: must be at least 1 (got -3)");
  EXPECT_EQ(*f->GetCount("rank-hint", -1, 0), 0);
  absl::StatusOr<Flags> none = Flags::Parse({}, specs);
  EXPECT_EQ(*none->GetCount("steps", -1), -1) << "absent: the fallback, whatever it is";
}

}  // namespace
}  // namespace xhc
