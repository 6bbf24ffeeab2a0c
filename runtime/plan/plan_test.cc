#include "runtime/plan/plan.h"

#include "gtest/gtest.h"

namespace xhc::plan {
namespace {

Config WithPipeline(const std::string& schedule, int layers, int microbatches) {
  Config c;
  c.model.n_layers = layers;
  c.pipeline.schedule = schedule;
  c.train.microbatches = microbatches;
  return c;
}

TEST(Plan, SplitCoversEveryLayerOnceWithEndsLighter) {
  for (int layers = 1; layers <= 12; ++layers) {
    for (int stages = 1; stages <= layers; ++stages) {
      const auto specs = SplitLayers(layers, stages);
      ASSERT_EQ(static_cast<int>(specs.size()), stages);
      int next = 0, lo = layers, hi = 0;
      for (const auto& s : specs) {
        EXPECT_EQ(s.first_layer, next);
        next += s.num_layers;
        lo = std::min(lo, s.num_layers);
        hi = std::max(hi, s.num_layers);
      }
      EXPECT_EQ(next, layers);
      EXPECT_LE(hi - lo, 1);
      EXPECT_TRUE(specs.front().has_embed);
      EXPECT_TRUE(specs.back().has_head);
      if (layers % stages != 0 && layers % stages <= stages - 2) {
        EXPECT_EQ(specs.front().num_layers, lo);
        EXPECT_EQ(specs.back().num_layers, lo);
      }
    }
  }
}

TEST(Plan, DualPipeVHoldsAVAndLowers) {
  absl::StatusOr<JobPlan> p = MakePlan(WithPipeline("dualpipev", 8, 8), 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->schedule.num_stages, 8);
  EXPECT_EQ(p->StagesOf(0), (std::vector<int>{0, 7}));
  EXPECT_EQ(p->lowered.size(), 4u);
  EXPECT_FALSE(DescribeRankActions(*p, 0).empty());
}

TEST(Plan, BadRequestsNameTheKey) {
  auto expect = [](const absl::StatusOr<JobPlan>& p, const std::string& key) {
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(p.status().message()).find(key), std::string::npos)
        << p.status().message();
  };
  expect(MakePlan(WithPipeline("dualpipe", 8, 8), 3), "pipeline.schedule");
  expect(MakePlan(WithPipeline("bogus", 8, 8), 2), "pipeline.schedule");
  expect(MakePlan(WithPipeline("dualpipev", 4, 8), 4), "model.n_layers");
  expect(MakePlan(WithPipeline("1f1b", 4, 8), 0), "pipeline.workers");
}

// xhc_flash window 4 spans two layers: stages hold whole layer pairs (spec 4.5), and a
// pipeline that would need to cut a pair is refused naming the window key.
TEST(Plan, FlashWindowsNeverStraddleAStage) {
  Config c = WithPipeline("1f1b", 12, 8);
  c.model.residual.type = ResidualType::kXhcFlash;
  c.model.residual.window = 4;
  for (int workers : {1, 2, 3, 4, 6}) {
    absl::StatusOr<JobPlan> p = MakePlan(c, workers);
    ASSERT_TRUE(p.ok()) << p.status();
    int next = 0;
    for (const auto& s : p->stages) {
      EXPECT_EQ(s.first_layer % 2, 0) << workers << " workers";
      EXPECT_EQ(s.num_layers % 2, 0) << workers << " workers";
      EXPECT_EQ(s.first_layer, next);
      next += s.num_layers;
    }
    EXPECT_EQ(next, 12);
  }
  absl::StatusOr<JobPlan> too_many = MakePlan(c, 12);  // 12 stages of 12 layers: pairs cut
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(std::string(too_many.status().message()).find("model.residual.window"),
            std::string::npos)
      << too_many.status().message();
  c.model.residual.window = 2;  // one layer per window: any layer split is fine
  EXPECT_TRUE(MakePlan(c, 12).ok());
}

}  // namespace
}  // namespace xhc::plan
