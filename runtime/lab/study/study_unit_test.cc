// Unit tests of the study's parsing and measurement code (no processes); charts: chart_test.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/lab/study/bubbles.h"
#include "runtime/lab/study/measure.h"
#include "runtime/lab/study/study_config.h"

namespace xhc::study {
namespace {

constexpr char kStudy[] = R"(
study:
  schedules: [1f1b, dualpipev]
  residuals: [vanilla, xhc]
  devices: 2
  stages: 2
  microbatch_factors: [2]
  steps: 3
  warmup_steps: 1
job:
  model: {d_model: 16, n_layers: 4, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,
          residual: {type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: [2]}}
  train: {batch_size: 2}
)";

TEST(StudyConfig, ExpandsEqualDeviceAndEqualStageRuns) {
  auto c = ParseStudyConfig(kStudy);
  ASSERT_TRUE(c.ok()) << c.status();
  auto runs = ExpandRuns(*c);
  ASSERT_TRUE(runs.ok()) << runs.status();
  // Per residual: 1f1b R2, dualpipev R2 (4 stages), and dualpipev R1 for PP = 2.
  ASSERT_EQ(runs->size(), 6u);
  EXPECT_EQ((*runs)[1].id, "vanilla-dualpipev-R2-M4");
  EXPECT_EQ((*runs)[1].num_stages, 4);
  EXPECT_EQ((*runs)[2].comparison, "equal-stages");
  EXPECT_EQ((*runs)[2].num_ranks, 1);
  EXPECT_NE((*runs)[0].job_yaml.find("vanilla"), std::string::npos);
  EXPECT_NE((*runs)[3].job_yaml.find("n_streams: 6"), std::string::npos);
}

TEST(StudyConfig, RejectsUnknownKeysAndPipelineBlock) {
  // A typo in the job block is caught when the runs are expanded, before any run starts.
  auto typo = ParseStudyConfig(std::string(kStudy) + "  extra: 1\n");
  ASSERT_TRUE(typo.ok()) << typo.status();
  auto runs = ExpandRuns(*typo);
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.status().message().find("extra"), std::string::npos) << runs.status();
  auto bad = ParseStudyConfig("study: {schedulez: [gpipe]}\njob: {}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("schedulez"), std::string::npos) << bad.status();
  auto pipe = ParseStudyConfig("study: {}\njob: {pipeline: {workers: 2}}\n");
  ASSERT_FALSE(pipe.ok());
  EXPECT_NE(pipe.status().message().find("job.pipeline"), std::string::npos);
}

TEST(Measure, MetricsDiscardWarmupAndAverage) {
  const std::string text =
      "{\"step\": 1, \"loss\": 5, \"step_s\": 9, \"tokens_per_s\": 1, \"exposed_comm\": [0.9, "
      "0.9]}\n"
      "{\"step\": 2, \"loss\": 4, \"step_s\": 0.2, \"tokens_per_s\": 100, \"exposed_comm\": "
      "[0.1, 0.3], \"peak_rss_mb\": [10, 20]}\n"
      "{\"checkpoint_step\": 2, \"bytes\": 100, \"snapshot_stall_s\": 0.001}\n"
      "{\"step\": 3, \"loss\": 3, \"step_s\": 0.4, \"tokens_per_s\": 200, \"exposed_comm\": "
      "[0.3, 0.1], \"peak_rss_mb\": [12, 18]}\n";
  auto m = ParseMetrics(text, 1);  // the checkpoint row in between is skipped
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_steps, 2);
  EXPECT_DOUBLE_EQ(m->tokens_per_s, 150);
  EXPECT_DOUBLE_EQ(m->step_s, 0.3);
  EXPECT_DOUBLE_EQ(m->loss, 3);
  EXPECT_DOUBLE_EQ(m->exposed_comm[0], 0.2);
  EXPECT_DOUBLE_EQ(m->peak_rss_mb[1], 20);
  EXPECT_FALSE(ParseMetrics(text, 3).ok());
  EXPECT_FALSE(ParseMetrics("not json\n", 0).ok());
}

std::string Event(const std::string& name, int pid, int tid, double ts, double dur) {
  return absl::StrCat("{\"ph\":\"X\",\"name\":\"", name, "\",\"pid\":", pid, ",\"tid\":", tid,
                      ",\"ts\":", ts, ",\"dur\":", dur, "}");
}

// Two ranks, one micro-batch, two steps (the first discarded). In step 2 rank 0 runs F0.0
// [1000, 2000), rank 1 waits for it until 2500 (transfer 0.5 ms), runs F1.0 [2500, 3500),
// I1.0 [3500, 5500); rank 0's I0.0 runs [6000, 8000) after waiting: window 1000..8000.
std::string TwoRankTrace() {
  std::vector<std::string> e = {
      Event("F0.0", 0, 0, 0, 10),          Event("optimizer", 0, 0, 20, 5),
      Event("F1.0", 1, 0, 10, 10),         Event("optimizer", 1, 0, 30, 5),
      Event("F0.0", 0, 0, 1000, 1000),     Event("recv B0.0", 0, 1, 2000, 4000),
      Event("I0.0", 0, 0, 6000, 2000),     Event("W0.0", 0, 0, 8000 - 1, 1),
      Event("optimizer", 0, 0, 9000, 100), Event("recv F1.0", 1, 1, 1500, 1000),
      Event("F1.0", 1, 0, 2500, 1000),     Event("I1.0", 1, 0, 3500, 2000),
      Event("optimizer", 1, 0, 9000, 100)};
  return absl::StrCat("{\"traceEvents\":[", absl::StrJoin(e, ","), "]}");
}

TEST(Measure, TraceBubbleCostsAndTransfer) {
  auto t = ParseTrace(TwoRankTrace(), 2, 1);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->window_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(t->window_ms[0], 7.0);
  EXPECT_NEAR(t->bubble[0], 1 - 3.001 / 7.0, 1e-12);
  EXPECT_NEAR(t->bubble[1], 1 - 3.0 / 7.0, 1e-12);
  ASSERT_EQ(t->compute_ms.size(), 2u);  // the kept step's F/I/W only (not the optimizer)
  EXPECT_NEAR(t->compute_ms[0], 3.001, 1e-12);
  EXPECT_NEAR(t->compute_ms[1], 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(t->stages.at(1).i, 2.0);
  EXPECT_DOUBLE_EQ(t->stages.at(0).f, 1.0);
  // recv F1.0 ends at 2500, F0.0 ended at 2000; recv B0.0 ends at 6000, I1.0 ended at 5500.
  EXPECT_EQ(t->transfer_samples, 2);
  EXPECT_DOUBLE_EQ(t->transfer_ms, 0.5);
  EXPECT_FALSE(ParseTrace("{}", 2, 0).ok());
}

// A receive whose wait began after its producer had finished is no transfer sample, however long it
// took (a transport that copies inside the wait: docs/design/pipeline-wait-accounting.md); one
// split into "wait peer" + "recv" began at the first part.
TEST(Measure, TransfersOnlyFromWaitsThatBeganBeforeTheProducerEnded) {
  std::vector<std::string> e = {
      Event("F0.0", 0, 0, 0, 10), Event("optimizer", 0, 0, 20, 5), Event("F1.0", 1, 0, 10, 10),
      Event("optimizer", 1, 0, 30, 5),
      // Step 2: F0.0 ends at 2000 and F0.1 at 3000.
      Event("F0.0", 0, 0, 1000, 1000), Event("F0.1", 0, 0, 2000, 1000),
      Event("optimizer", 0, 0, 9000, 100),
      // recv F1.0 waited from 1500 (peer computing until the send at 2000), data at 2300.
      Event("wait peer recv F1.0", 1, 2, 1500, 500), Event("recv F1.0", 1, 1, 2000, 300),
      Event("F1.0", 1, 0, 2300, 1000),
      // recv F1.1 began at 3300, after F0.1 ended: 400 µs of copying, not a 700 µs transfer.
      Event("recv F1.1", 1, 1, 3300, 400), Event("F1.1", 1, 0, 3700, 1000),
      Event("optimizer", 1, 0, 9000, 100)};
  auto t = ParseTrace(absl::StrCat("{\"traceEvents\":[", absl::StrJoin(e, ","), "]}"), 2, 1);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->transfer_samples, 1);
  EXPECT_DOUBLE_EQ(t->transfer_ms, 0.3);
}

TEST(Bubbles, SimulatedMatchesAnalyticUnderUniformCosts) {
  StageCosts uniform{1.0, 1.0, 1.0, 1};
  for (const char* type : {"gpipe", "1f1b", "zb1p"}) {
    // The published formulas send a backward's gradient at the end of the whole B.
    scheduler::SimCosts atomic = CostsFrom(uniform, 0, -1);
    atomic.sequential_pieces = false;
    auto b = ComputeModelBubbles(type, 4, 8, atomic);
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(b->analytic.size(), 4u);
    for (int r = 0; r < 4; ++r) EXPECT_NEAR(b->simulated[r], b->analytic[r], 1e-9) << type;
    // The CPU worker sends it after the I half: less idle wherever B is not split already.
    auto p = ComputeModelBubbles(type, 4, 8, CostsFrom(uniform, 0, -1));
    ASSERT_TRUE(p.ok()) << p.status();
    for (int r = 0; r < 4; ++r) {
      if (std::string(type) == "zb1p") {
        EXPECT_NEAR(p->simulated[r], b->analytic[r], 1e-9) << type;
      } else {
        EXPECT_LT(p->simulated[r], b->analytic[r] - 0.01) << type << " rank " << r;
      }
    }
  }
}

}  // namespace
}  // namespace xhc::study
