#include "scheduler/simulator.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "scheduler/analytic.h"
#include "scheduler/schedule.h"

namespace xhc::scheduler {
namespace {

Schedule Build(const std::string& type, int ranks, int mbs, int chunks = 1) {
  absl::StatusOr<Schedule> s = BuildSchedule({type, ranks, mbs, chunks});
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// The simulated bubble matches the published formula within 1%. The formula is the bubble
// of the rank with the least work; when F&B is cheaper than F + B, DualPipe's outer ranks
// run fewer overlapped pairs, so they are busier and idle less than the formula says.
void ExpectFormula(const Schedule& s, const SimCosts& costs) {
  absl::StatusOr<SimResult> sim = Simulate(s, costs);
  ASSERT_TRUE(sim.ok()) << sim.status();
  std::optional<double> expected = AnalyticBubble(s, costs);
  ASSERT_TRUE(expected.has_value());
  const double tolerance = 0.01 * *expected + 1e-9;
  const std::string what = absl::StrCat(s.type, " R=", s.num_ranks, " M=", s.num_microbatches);
  EXPECT_NEAR(*std::max_element(sim->bubble.begin(), sim->bubble.end()), *expected, tolerance)
      << what;
  const bool no_overlap = costs.FB() == costs.f + costs.b;
  for (int r = 0; r < s.num_ranks; ++r) {
    if (no_overlap) {
      EXPECT_NEAR(sim->bubble[r], *expected, tolerance) << what << " rank " << r;
    }
    EXPECT_LE(sim->bubble[r], *expected + tolerance) << what << " rank " << r;
  }
}

TEST(SimulatorFormula, OneFOneBAndGPipe) {
  for (const std::string type : {"1f1b", "gpipe"}) {
    for (int ranks : {2, 4, 8}) {
      for (int mbs : {ranks, 2 * ranks, 3 * ranks + 1}) {
        ExpectFormula(Build(type, ranks, mbs), SimCosts{.f = 1, .b = 2});
        ExpectFormula(Build(type, ranks, mbs), SimCosts{.f = 1.5, .b = 2.5});
      }
    }
  }
}

TEST(SimulatorFormula, InterleavedIsOneOverVOf1F1B) {
  for (int ranks : {2, 4}) {
    for (int chunks : {2, 3}) {
      for (int mbs : {2 * ranks, 4 * ranks}) {
        ExpectFormula(Build("interleaved1f1b", ranks, mbs, chunks), SimCosts{.f = 1, .b = 2});
      }
    }
  }
}

TEST(SimulatorFormula, ZB1P) {
  for (int ranks : {2, 4, 8}) {
    for (int mbs : {ranks, 2 * ranks, 3 * ranks + 1}) {
      ExpectFormula(Build("zb1p", ranks, mbs), SimCosts{.f = 1, .b = 2, .i = 1, .w = 1});
    }
  }
}

TEST(SimulatorFormula, DualPipeAndDualPipeV) {
  const std::vector<SimCosts> costs = {
      SimCosts{.f = 1, .b = 2, .i = 1, .w = 1},                   // F&B = F + B
      SimCosts{.f = 1, .b = 2, .i = 1, .w = 1, .fb = 2.5},        // partly hidden
      SimCosts{.f = 1, .b = 2, .i = 1, .w = 1, .fb_overlap = 1},  // F&B = max(F, B)
  };
  for (const SimCosts& c : costs) {
    for (int ranks : {2, 4, 6, 8}) {
      for (int mbs : {2 * ranks, 2 * ranks + 2, 4 * ranks}) {
        ExpectFormula(Build("dualpipe", ranks, mbs), c);
      }
    }
    for (int ranks : {1, 2, 3, 4, 8}) {
      for (int mbs : {2 * ranks, 2 * ranks + 1, 4 * ranks}) {
        ExpectFormula(Build("dualpipev", ranks, mbs), c);
      }
    }
  }
}

TEST(SimulatorMemory, PeakActivationsMatchTheReport) {
  // 1F1B and ZB1P: PP on the first rank; DualPipe: PP+1; DualPipeV: PP+1 with PP = 2R.
  for (int pp : {2, 4, 8}) {
    absl::StatusOr<SimResult> sim = Simulate(Build("1f1b", pp, 3 * pp), SimCosts{});
    ASSERT_TRUE(sim.ok());
    EXPECT_EQ(sim->peak_activations[0], pp);
    sim = Simulate(Build("zb1p", pp, 3 * pp), SimCosts{});
    ASSERT_TRUE(sim.ok());
    EXPECT_EQ(*std::max_element(sim->peak_activations.begin(), sim->peak_activations.end()), pp);
    sim = Simulate(Build("dualpipe", pp, 3 * pp), SimCosts{});
    ASSERT_TRUE(sim.ok());
    EXPECT_EQ(*std::max_element(sim->peak_activations.begin(), sim->peak_activations.end()),
              pp + 1);
    sim = Simulate(Build("dualpipev", pp / 2, 3 * pp), SimCosts{});
    ASSERT_TRUE(sim.ok());
    EXPECT_EQ(sim->peak_activations[0], pp + 1);
  }
}

TEST(SimulatorMemory, DualPipeHoldsTwoStageReplicasPerRank) {
  Schedule dual = Build("dualpipe", 4, 8), one = Build("1f1b", 4, 8);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(dual.rank_stages[r].size(), 2 * one.rank_stages[r].size());
  }
}

TEST(SimulatorComm, TransfersDelayAndAreReportedAsExposed) {
  Schedule s = Build("1f1b", 4, 8);
  SimCosts free_comm{.f = 1, .b = 2};
  SimCosts slow = free_comm;
  // 16 streams x 256 tokens x 64 channels x 2 bytes = 512 KiB per boundary at 100 Gb/s.
  slow.payload_bytes = PayloadBytes(256, 16, 64, 2);
  slow.bandwidth_gbps = 100;
  slow.latency_us = 10;
  EXPECT_NEAR(slow.P2PTime(slow.payload_bytes), 0.01 + 524288.0 * 8 / 100e9 * 1000, 1e-9);
  absl::StatusOr<SimResult> fast_run = Simulate(s, free_comm);
  absl::StatusOr<SimResult> slow_run = Simulate(s, slow);
  ASSERT_TRUE(fast_run.ok() && slow_run.ok());
  EXPECT_GT(slow_run->makespan, fast_run->makespan);
  EXPECT_EQ(fast_run->exposed_comm[0], 0.0);
  EXPECT_GT(slow_run->exposed_comm[0], 0.0);
  // The first forward crosses PP-1 boundaries on its way down, the last backward as many
  // on its way up.
  EXPECT_GE(slow_run->makespan - fast_run->makespan, 6 * slow.P2PTime(slow.payload_bytes) - 1e-9);
}

TEST(SimulatorComm, OverlapFactorSetsFBCost) {
  EXPECT_DOUBLE_EQ((SimCosts{.f = 1, .b = 2}).FB(), 3.0);
  EXPECT_DOUBLE_EQ((SimCosts{.f = 1, .b = 2, .fb_overlap = 0.5}).FB(), 2.5);
  EXPECT_DOUBLE_EQ((SimCosts{.f = 1, .b = 2, .fb = 2.2}).FB(), 2.2);
}

TEST(SimulatorDeadlock, CrossedBackwardsAreReported) {
  Schedule s = Build("1f1b", 2, 2);
  // Rank 1 runs B1 before B0 while rank 0 waits... Swap rank 1's two forwards instead so
  // that rank 1 waits for F1 while rank 0 waits for B0: a cycle.
  s.rank_actions[0] = {Action::F(0, 0), Action::B(0, 0), Action::F(0, 1), Action::B(0, 1)};
  s.rank_actions[1] = {Action::F(1, 1), Action::B(1, 1), Action::F(1, 0), Action::B(1, 0)};
  absl::StatusOr<SimResult> sim = Simulate(s, SimCosts{});
  ASSERT_FALSE(sim.ok());
  EXPECT_EQ(sim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(sim.status().message().find("deadlock"), std::string::npos);
  EXPECT_NE(sim.status().message().find(">>1F1<<"), std::string::npos);
  EXPECT_NE(sim.status().message().find(">>0B0<<"), std::string::npos);
}

}  // namespace
}  // namespace xhc::scheduler
