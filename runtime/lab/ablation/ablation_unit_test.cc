#include <cmath>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/config.h"
#include "runtime/lab/ablation/ablation.h"

namespace xhc::ablation {
namespace {

const char kJob[] =
    "job:\n"
    "  model: {vocab_size: 256, d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, seq_len: 8}\n"
    "  train: {batch_size: 2, microbatches: 1, eval_batches: 2}\n";

TEST(AblationConfigTest, ExpandsVariantsTimesSeedsWithTheSameDataPerSeed) {
  auto c = ParseAblationConfig(absl::StrCat(
      "ablation: {variants: [vanilla, mhc4_conv, xhc_flash4], seeds: [7, 8], steps: 4, "
      "eval_every: 2}\n",
      kJob));
  ASSERT_TRUE(c.ok()) << c.status();
  auto runs = ExpandAblationRuns(*c);
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 6u);
  EXPECT_EQ((*runs)[0].id, "vanilla-s7");
  EXPECT_EQ((*runs)[5].id, "xhc_flash4-s8");
  auto conv = ParseConfig((*runs)[2].job_yaml);
  ASSERT_TRUE(conv.ok()) << conv.status();
  EXPECT_EQ(conv->model.residual.type, ResidualType::kMhc);
  EXPECT_EQ(conv->model.residual.conv_kernels, (std::vector<int>{4, 8, 12}));
  EXPECT_EQ(conv->train.seed, 7u);
  auto flash = ParseConfig((*runs)[5].job_yaml);
  ASSERT_TRUE(flash.ok());
  EXPECT_EQ(flash->model.residual.window, 4);
  // Matched recipes: everything but the residual block is the same for one seed.
  auto vanilla = ParseConfig((*runs)[0].job_yaml);
  EXPECT_EQ(vanilla->train.steps, conv->train.steps);
  EXPECT_EQ(vanilla->optim.lr, conv->optim.lr);
  EXPECT_EQ(vanilla->train.batch_size, conv->train.batch_size);
}

TEST(AblationConfigTest, BadInputNamesTheKey) {
  auto bad = ParseAblationConfig(absl::StrCat("ablation: {variants: [vanila]}\n", kJob));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ablation.variants"), std::string::npos);
  EXPECT_NE(bad.status().message().find("vanila"), std::string::npos);
  auto typo = ParseAblationConfig(absl::StrCat("ablation: {sedes: [1]}\n", kJob));
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("sedes"), std::string::npos);
  auto seed = ParseAblationConfig("ablation: {}\njob:\n  train: {seed: 3}\n");
  ASSERT_FALSE(seed.ok());
  EXPECT_NE(seed.status().message().find("job.train"), std::string::npos);
}

RunResult Curve(double tokens_per_step, double flops, std::vector<CurvePoint> pts) {
  RunResult r;
  r.ok = true;
  r.steps = pts.back().step;
  r.tokens_per_step = tokens_per_step;
  r.flops.backbone = flops / 3;
  r.curve = std::move(pts);
  return r;
}

TEST(AblationResultTest, InterpolatesOnEveryAxis) {
  const RunResult r = Curve(10, 6, {{10, 3.0, 1.0}, {20, 2.0, 3.0}});
  EXPECT_DOUBLE_EQ(LossAt(r, Axis::kSteps, 15), 2.5);
  EXPECT_DOUBLE_EQ(LossAt(r, Axis::kSteps, 20), 2.0);
  EXPECT_TRUE(std::isnan(LossAt(r, Axis::kSteps, 5)));  // before the first point
  EXPECT_TRUE(std::isnan(LossAt(r, Axis::kSteps, 25)));
  EXPECT_DOUBLE_EQ(LossAt(r, Axis::kFlops, 15 * 10 * 6), 2.5);
  EXPECT_DOUBLE_EQ(LossAt(r, Axis::kSeconds, 1.5), 2.75);
}

TEST(AblationResultTest, MetricsAndJsonRoundTrip) {
  RunResult r;
  r.id = "xhc-s1";
  r.variant = "xhc";
  r.seed = 1;
  r.steps = 2;
  r.tokens_per_step = 100;
  ASSERT_TRUE(ParseTrainMetrics("{\"step\": 1, \"loss\": 5, \"step_s\": 0.5}\n"
                                "{\"step\": 2, \"loss\": 4, \"step_s\": 1.5, \"val_loss\": 4.25}\n"
                                "{\"checkpoint\": 2}\n",
                                &r)
                  .ok());
  ASSERT_EQ(r.curve.size(), 1u);
  EXPECT_DOUBLE_EQ(r.curve[0].train_s, 2.0);
  EXPECT_DOUBLE_EQ(r.tokens_per_s, 100.0);
  r.ok = true;
  auto back = ParseRunResultJson(RunResultJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->id, "xhc-s1");
  EXPECT_DOUBLE_EQ(back->final_val_loss(), 4.25);
  RunResult short_run = r;
  short_run.steps = 3;
  EXPECT_FALSE(
      ParseTrainMetrics("{\"step\": 1, \"step_s\": 1, \"val_loss\": 3}\n", &short_run).ok());
}

// The findings follow the numbers: the same report code says "holds" for one set of
// results and "does not hold" for the opposite.
TEST(AblationReportTest, FindingsFollowTheNumbers) {
  AblationOutcome o;
  o.config.variants = {"vanilla", "mhc4", "mhc4_conv", "xhc"};
  o.config.seeds = {1, 2};
  o.config.steps = 20;
  auto add = [&](const std::string& v, int seed, double loss) {
    RunResult r = Curve(10, 6, {{10, loss + 1, 1.0}, {20, loss, 2.0}});
    r.variant = v;
    r.id = absl::StrCat(v, "-s", seed);
    r.seed = seed;
    r.train_s = 2.0;
    r.tokens_per_s = 100;
    o.runs.push_back(r);
  };
  for (int seed : {1, 2}) {
    add("vanilla", seed, 3.0 + 0.001 * seed);
    add("mhc4", seed, 2.5 + 0.001 * seed);
    add("mhc4_conv", seed, 2.25 + 0.001 * seed);
    add("xhc", seed, 2.0 + 0.001 * seed);
  }
  const std::string good = RenderAblationReport(o);
  EXPECT_NE(good.find("xhc ≤ mhc < vanilla holds here"), std::string::npos) << good;
  EXPECT_NE(good.find("| vanilla | 2/2 | 3.0015 ± 0.0007"), std::string::npos) << good;
  EXPECT_NE(good.find("recovers 50% of xhc's gain"), std::string::npos) << good;
  // Every variant's seeds move together: the paired difference has no spread at all.
  EXPECT_NE(good.find("paired by seed -0.5000 ± 0.0000 over 2 seeds, more than twice its "
                      "standard error"),
            std::string::npos)
      << good;
  for (RunResult& r : o.runs) {
    if (r.variant == "xhc") r.curve.back().val_loss += 2;
  }
  const std::string bad = RenderAblationReport(o);
  EXPECT_NE(bad.find("does not hold here"), std::string::npos) << bad;
  EXPECT_NE(bad.find("xhc does not beat mhc4"), std::string::npos) << bad;
}

}  // namespace
}  // namespace xhc::ablation
