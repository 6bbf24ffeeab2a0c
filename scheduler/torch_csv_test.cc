#include "scheduler/torch_csv.h"

#include <string>

#include "gtest/gtest.h"
#include "scheduler/schedule.h"
#include "scheduler/validator.h"

namespace xhc::scheduler {
namespace {

TEST(TorchCsv, FormatMatchesPyTorch) {
  std::vector<std::vector<Action>> lists = {
      {Action::F(0, 0), Action::Comm(ActionType::kSendF, 0, 0, 1),
       Action::FB(Action::F(0, 7), Action::B(7, 3))},
      {Action::I(7, 0), Action::W(7, 0)}};
  EXPECT_EQ(WriteTorchCsv(lists), "0F0,0SEND_F0,(0F7;7B3)OVERLAP_F_B\n7I0,7W0\n");
}

TEST(TorchCsv, RoundTripsEveryTypeExactly) {
  const ScheduleRequest requests[] = {{"gpipe", 3, 5, 1},    {"1f1b", 4, 8, 1},
                                      {"zb1p", 4, 9, 1},     {"interleaved1f1b", 2, 4, 3},
                                      {"dualpipe", 4, 8, 1}, {"dualpipev", 4, 10, 1}};
  for (const ScheduleRequest& req : requests) {
    absl::StatusOr<Schedule> s = BuildSchedule(req);
    ASSERT_TRUE(s.ok()) << s.status();
    // Compute lists: text and actions both survive.
    const std::string csv = WriteTorchCsv(s->rank_actions);
    absl::StatusOr<std::vector<std::vector<Action>>> back = ReadTorchCsv(csv);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, s->rank_actions) << req.type;
    EXPECT_EQ(WriteTorchCsv(*back), csv);
    // The layout recovered from the actions lowers to the same lists, peers included.
    absl::StatusOr<Schedule> foreign = ScheduleFromActions(*back);
    ASSERT_TRUE(foreign.ok()) << foreign.status();
    EXPECT_EQ(foreign->stage_mb_rank, s->stage_mb_rank) << req.type;
    EXPECT_EQ(foreign->Lower(), s->Lower()) << req.type;
    // Lowered lists: peers are not in the CSV and come back from the layout.
    std::vector<std::vector<Action>> lowered = s->Lower();
    absl::StatusOr<std::vector<std::vector<Action>>> lowered_back =
        ReadTorchCsv(WriteTorchCsv(lowered));
    ASSERT_TRUE(lowered_back.ok()) << lowered_back.status();
    ASSERT_TRUE(FillPeers(*foreign, *lowered_back).ok());
    EXPECT_EQ(*lowered_back, lowered) << req.type;
    EXPECT_TRUE(ValidateLists(*foreign, *lowered_back).ok()) << req.type;
  }
}

TEST(TorchCsv, ToleratesEmptyCellsAndNamesBadCells) {
  absl::StatusOr<std::vector<std::vector<Action>>> lists = ReadTorchCsv("0F0,,0B0,\n1F0,1B0\n\n");
  ASSERT_TRUE(lists.ok()) << lists.status();
  EXPECT_EQ(lists->size(), 2u);
  EXPECT_EQ((*lists)[0].size(), 2u);
  absl::StatusOr<std::vector<std::vector<Action>>> bad = ReadTorchCsv("0F0,0B0\n1F0,1Q0\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("row 1 (rank 1) cell 1"), std::string::npos)
      << bad.status();
  EXPECT_FALSE(ReadTorchCsv("\n").ok());
}

// Regression (torch_csv_fuzzer, corpus crash-rank-without-actions): "," was one rank with no
// actions, and WriteTorchCsv of it ("\n") read back as no rank at all.
TEST(TorchCsv, RankWithoutActionsIsNamed) {
  for (const char* text : {",", "0F0,0B0\n , ,\n1F0\n", "\n0F0\n"}) {
    absl::StatusOr<std::vector<std::vector<Action>>> lists = ReadTorchCsv(text);
    ASSERT_FALSE(lists.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(lists.status()));
    EXPECT_NE(lists.status().message().find("has no actions"), std::string::npos) << lists.status();
  }
  EXPECT_NE(ReadTorchCsv("0F0\n\n1F0\n").status().message().find("row 1 (rank 1)"),
            std::string::npos);
}

// Regression (torch_csv_fuzzer, corpus oom-stage-50022502): "50022502F0" made
// ScheduleFromActions allocate a 50022502-row ownership table (1.2 GB), and INT_MAX as an
// index overflowed its + 1. Indices are now bounded by the forwards actually listed.
TEST(TorchCsv, IndicesBeyondTheListedForwardsAreRefusedBeforeAllocating) {
  for (const char* text :
       {"50022502F0\n", "0F2147483647\n", "2147483647F2147483647\n", "0F0,1F5\n"}) {
    absl::StatusOr<std::vector<std::vector<Action>>> lists = ReadTorchCsv(text);
    ASSERT_TRUE(lists.ok()) << text << lists.status();
    absl::StatusOr<Schedule> s = ScheduleFromActions(*lists);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_TRUE(absl::IsInvalidArgument(s.status()));
    EXPECT_NE(s.status().message().find("forwards, but only"), std::string::npos) << s.status();
  }
  absl::StatusOr<std::vector<std::vector<Action>>> ok = ReadTorchCsv("0F0,0F1,0B0,0B1\n");
  ASSERT_TRUE(ok.ok());
  absl::StatusOr<Schedule> s = ScheduleFromActions(*ok);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_microbatches, 2);
}

}  // namespace
}  // namespace xhc::scheduler
