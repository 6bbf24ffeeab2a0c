#include "scheduler/validator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/simulator.h"

namespace xhc::scheduler {
namespace {

struct Sweep {
  std::string type;
  int chunks;
};

// Micro-batch counts around each type's edge cases.
std::vector<int> MicrobatchCounts(int ranks) {
  return {1, 2, 3, ranks, ranks + 1, 2 * ranks, 2 * ranks + 1, 2 * ranks + 2, 3 * ranks + 2};
}

TEST(ValidatorSweep, EveryTypeRanksAndMicrobatchesValidatesAndSimulates) {
  const Sweep sweeps[] = {{"gpipe", 1},
                          {"1f1b", 1},
                          {"zb1p", 1},
                          {"interleaved1f1b", 1},
                          {"interleaved1f1b", 2},
                          {"interleaved1f1b", 3},
                          {"dualpipe", 1},
                          {"dualpipev", 1},
                          {"zbv", 1},
                          {"interleaved_zb", 1},
                          {"interleaved_zb", 2},
                          {"interleaved_zb", 3},
                          {"looped_bfs", 1},
                          {"looped_bfs", 2},
                          {"looped_bfs", 3}};
  int num_built = 0, num_rejected = 0;
  for (const Sweep& sweep : sweeps) {
    for (int ranks = 1; ranks <= 8; ++ranks) {
      for (int mbs : MicrobatchCounts(ranks)) {
        absl::StatusOr<Schedule> s = BuildSchedule({sweep.type, ranks, mbs, sweep.chunks});
        const std::string what = sweep.type + " R=" + std::to_string(ranks) +
                                 " M=" + std::to_string(mbs) + " V=" + std::to_string(sweep.chunks);
        if (!s.ok()) {
          // Only the documented restrictions may reject a request.
          EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << what;
          EXPECT_TRUE(sweep.type == "dualpipe" || sweep.type == "dualpipev" ||
                      sweep.type == "interleaved1f1b" || sweep.type == "interleaved_zb")
              << what << ": " << s.status();
          ++num_rejected;
          continue;
        }
        ++num_built;
        absl::StatusOr<ValidationReport> report = Validate(*s);
        ASSERT_TRUE(report.ok()) << what << ": " << report.status();
        absl::StatusOr<SimResult> sim = Simulate(*s, SimCosts{});
        ASSERT_TRUE(sim.ok()) << what << ": " << sim.status();
        EXPECT_EQ(sim->peak_activations, report->peak_activations) << what;
        EXPECT_GT(sim->makespan, 0) << what;
      }
    }
  }
  EXPECT_GT(num_built, 550);
  EXPECT_GT(num_rejected, 50);
}

Schedule Build(const std::string& type, int ranks, int mbs) {
  absl::StatusOr<Schedule> s = BuildSchedule({type, ranks, mbs, 1});
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

void ExpectError(const Schedule& layout, const std::vector<std::vector<Action>>& lists,
                 const std::string& message, const std::string& marked) {
  absl::StatusOr<ValidationReport> report = ValidateLists(layout, lists);
  ASSERT_FALSE(report.ok()) << message;
  const std::string text(report.status().message());
  EXPECT_NE(text.find(message), std::string::npos) << text;
  EXPECT_NE(text.find(">>" + marked + "<<"), std::string::npos) << text;
}

TEST(ValidatorErrors, DuplicateActionIsMarked) {
  Schedule s = Build("1f1b", 2, 2);
  s.rank_actions[1].push_back(Action::F(1, 0));
  ExpectError(s, s.rank_actions, "1F0 appears twice", "1F0");
}

TEST(ValidatorErrors, StageOnTheWrongRankIsMarked) {
  Schedule s = Build("1f1b", 2, 2);
  s.rank_actions[0][0] = Action::F(1, 0);
  ExpectError(s, s.rank_actions, "runs on rank 1, not here", "1F0");
}

TEST(ValidatorErrors, MissingWeightGradIsReported) {
  Schedule s = Build("zb1p", 2, 2);
  s.rank_actions[0].pop_back();  // the last W
  absl::StatusOr<ValidationReport> report = ValidateLists(s, s.rank_actions);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("1 I, 0 W"), std::string::npos) << report.status();
}

TEST(ValidatorErrors, WeightGradBeforeItsInputGradDeadlocks) {
  Schedule s = Build("zb1p", 2, 2);
  auto& r1 = s.rank_actions[1];  // 1F0 1I0 1F1 1I1 1W0 1W1
  std::swap(r1[1], r1[4]);
  absl::StatusOr<ValidationReport> report = ValidateLists(s, s.rank_actions);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(report.status().message().find(">>1W0<<"), std::string::npos) << report.status();
}

TEST(ValidatorErrors, UnmatchedSendAndMissingReceive) {
  Schedule s = Build("1f1b", 2, 2);
  std::vector<std::vector<Action>> lowered = s.Lower();
  EXPECT_TRUE(ValidateLists(s, lowered).ok());
  // Drop rank 1's first receive: its consumer now reads an input never posted.
  ASSERT_EQ(lowered[1][0].type, ActionType::kRecvF);
  lowered[1].erase(lowered[1].begin());
  ExpectError(s, lowered, "never received before use", "1F0");
  // A send to a rank that never receives it.
  lowered = s.Lower();
  lowered[0].push_back(Action::Comm(ActionType::kSendF, 0, 1, 1));
  ExpectError(s, lowered, "duplicate send", "0SEND_F1");
  // A send whose receive was dropped.
  lowered = s.Lower();
  const Action recv_b = Action::Comm(ActionType::kRecvB, 0, 1, 1);
  auto it = std::find(lowered[0].begin(), lowered[0].end(), recv_b);
  ASSERT_NE(it, lowered[0].end());
  lowered[0].erase(it);
  ExpectError(s, lowered, "never received before use", "0B1");
  // A forward output of the last stage sent to a rank that never receives it.
  lowered = s.Lower();
  lowered[1].push_back(Action::Comm(ActionType::kSendF, 1, 0, 0));
  ExpectError(s, lowered, "send has no matching receive", "1SEND_F0");
}

TEST(ValidatorReport, PeakActivations) {
  absl::StatusOr<ValidationReport> report = Validate(Build("1f1b", 4, 8));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->peak_activations, (std::vector<int>{4, 3, 2, 1}));
  report = Validate(Build("gpipe", 4, 8));
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->peak_activations, (std::vector<int>{8, 8, 8, 8}));
}

}  // namespace
}  // namespace xhc::scheduler
