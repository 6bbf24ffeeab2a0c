#include "scheduler/schedule.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace xhc::scheduler {
namespace {

std::vector<std::string> Rows(const std::vector<std::vector<Action>>& lists) {
  std::vector<std::string> rows;
  for (const auto& list : lists) {
    rows.push_back(absl::StrJoin(
        list, " ", [](std::string* out, const Action& a) { out->append(ToString(a)); }));
  }
  return rows;
}

Schedule Build(const std::string& type, int ranks, int mbs, int chunks = 1) {
  absl::StatusOr<Schedule> s = BuildSchedule({type, ranks, mbs, chunks});
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

// Golden orders, derived by hand by walking each schedule's phases. "FB" below is written
// (F;B) as in PyTorch's CSV.

TEST(Golden, OneFOneB_4Ranks_6Microbatches) {
  // Rank r: R-1-r warm-up forwards, then F/B pairs, then the remaining backwards.
  EXPECT_EQ(Rows(Build("1f1b", 4, 6).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5",
                "1F0 1F1 1F2 1B0 1F3 1B1 1F4 1B2 1F5 1B3 1B4 1B5",
                "2F0 2F1 2B0 2F2 2B1 2F3 2B2 2F4 2B3 2F5 2B4 2B5",
                "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5",
            }));
}

TEST(Golden, ZB1P_4Ranks_6Microbatches) {
  // As 1F1B with B split into I and W; rank r holds its first r W's back and spends them
  // in the cool-down (one after each I) and the final drain.
  EXPECT_EQ(Rows(Build("zb1p", 4, 6).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 0F2 0F3 0I0 0W0 0F4 0I1 0W1 0F5 0I2 0W2 0I3 0W3 0I4 0W4 0I5 0W5",
                "1F0 1F1 1F2 1I0 1F3 1I1 1W0 1F4 1I2 1W1 1F5 1I3 1W2 1I4 1W3 1I5 1W4 1W5",
                "2F0 2F1 2I0 2F2 2I1 2F3 2I2 2W0 2F4 2I3 2W1 2F5 2I4 2W2 2I5 2W3 2W4 2W5",
                "3F0 3I0 3F1 3I1 3F2 3I2 3F3 3I3 3W0 3F4 3I4 3W1 3F5 3I5 3W2 3W3 3W4 3W5",
            }));
}

TEST(Golden, DualPipe_4Ranks_8Microbatches) {
  // n = 2 ranks per half; rank 0 and 3 have h = 0, ranks 1 and 2 (the middle) h = 1.
  // Micro-batches 0-3 flow down (stage s on rank s), 4-7 flow up (stage s on rank 3-s).
  // Rank 0: phase 0 = stage 0 (mb 0-3), phase 1 = stage 3 (mb 4-7).
  //   1 nF0 x2: 0F0 0F1 | 2 nF0F1 x1: 0F2 3F4 | 3 nB1W1F1 x1: 3I4 3W4 3F5 |
  //   4 nF0B1F1B0 x1: (0F3;3B5) (3F6;0B0) | 5 nB1F1B0 x1: 3B6 (3F7;0B1) |
  //   6 nB1B0 x1 (zero bubble from B0 on, h even): 3B7 0I2 | 7 nWB0 x1: 0W2 0I3 | 8 nW: 0W3
  // Rank 1 (middle): phase 0 = stage 1 (mb 0-3), phase 1 = stage 2 (mb 4-7).
  //   2 nF0F1 x2: 1F0 2F4 1F1 2F5 | 4 x2, the first F0/B1 not overlapped: 1F2 2B4 (2F6;1B0)
  //   (1F3;2B5) (2F7;1B1) | 6 x2, zero bubble from i=1 (h odd): 2B6 1B2 2I7 1I3 | 8: 2W7 1W3
  // Ranks 2 and 3 mirror ranks 1 and 0 with the directions swapped.
  EXPECT_EQ(Rows(Build("dualpipe", 4, 8).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 0F2 3F4 3I4 3W4 3F5 (0F3;3B5)OVERLAP_F_B (3F6;0B0)OVERLAP_F_B 3B6 "
                "(3F7;0B1)OVERLAP_F_B 3B7 0I2 0W2 0I3 0W3",
                "1F0 2F4 1F1 2F5 1F2 2B4 (2F6;1B0)OVERLAP_F_B (1F3;2B5)OVERLAP_F_B "
                "(2F7;1B1)OVERLAP_F_B 2B6 1B2 2I7 1I3 2W7 1W3",
                "1F4 2F0 1F5 2F1 1F6 2B0 (2F2;1B4)OVERLAP_F_B (1F7;2B1)OVERLAP_F_B "
                "(2F3;1B5)OVERLAP_F_B 2B2 1B6 2I3 1I7 2W3 1W7",
                "0F4 0F5 0F6 3F0 3I0 3W0 3F1 (0F7;3B1)OVERLAP_F_B (3F2;0B4)OVERLAP_F_B 3B2 "
                "(3F3;0B5)OVERLAP_F_B 3B3 0I6 0W6 0I7 0W7",
            }));
}

TEST(Golden, DualPipeV_4Ranks_10Microbatches) {
  // Rank r holds stage r (phase 0, down the V) and 7-r (phase 1, up); n = 4, h = r.
  // Rank 3 (bottom of the V): 2 nF0F1 x4: 3F0 4F0 .. 3F3 4F3 | 4 x(10-8+3+1 = 6), the
  //   first F0/B1 apart: 3F4 4B0 (4F4;3B0) (3F5;4B1) ... (4F9;3B5) | 6 x4, zero bubble from
  //   i=2 (h odd): 4B6 3B6 4B7 3B7 4I8 3I8 4I9 3I9 | 8 nW x4: 4W8 3W8 4W9 3W9.
  // Rank 0: 1 nF0 x6: 0F0..0F5 | 2 x1: 0F6 7F0 | 3 nB1W1F1 x3: 7I0 7W0 7F1 7I1 7W1 7F2
  //   7I2 7W2 7F3 | 4 x3: (0F7;7B3) (7F4;0B0) (0F8;7B4) (7F5;0B1) (0F9;7B5) (7F6;0B2) |
  //   5 x3: 7B6 (7F7;0B3) 7B7 (7F8;0B4) 7B8 (7F9;0B5) | 6 x1: 7B9 0I6 | 7 x3: 0W6 0I7 0W7
  //   0I8 0W8 0I9 | 8: 0W9.
  std::vector<std::string> rows = Rows(Build("dualpipev", 4, 10).rank_actions);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0],
            "0F0 0F1 0F2 0F3 0F4 0F5 0F6 7F0 7I0 7W0 7F1 7I1 7W1 7F2 7I2 7W2 7F3 "
            "(0F7;7B3)OVERLAP_F_B (7F4;0B0)OVERLAP_F_B (0F8;7B4)OVERLAP_F_B (7F5;0B1)OVERLAP_F_B "
            "(0F9;7B5)OVERLAP_F_B (7F6;0B2)OVERLAP_F_B 7B6 (7F7;0B3)OVERLAP_F_B 7B7 "
            "(7F8;0B4)OVERLAP_F_B 7B8 (7F9;0B5)OVERLAP_F_B 7B9 0I6 0W6 0I7 0W7 0I8 0W8 0I9 0W9");
  EXPECT_EQ(rows[3],
            "3F0 4F0 3F1 4F1 3F2 4F2 3F3 4F3 3F4 4B0 (4F4;3B0)OVERLAP_F_B (3F5;4B1)OVERLAP_F_B "
            "(4F5;3B1)OVERLAP_F_B (3F6;4B2)OVERLAP_F_B (4F6;3B2)OVERLAP_F_B (3F7;4B3)OVERLAP_F_B "
            "(4F7;3B3)OVERLAP_F_B (3F8;4B4)OVERLAP_F_B (4F8;3B4)OVERLAP_F_B (3F9;4B5)OVERLAP_F_B "
            "(4F9;3B5)OVERLAP_F_B 4B6 3B6 4B7 3B7 4I8 3I8 4I9 3I9 4W8 3W8 4W9 3W9");
  // Rank 1: h = 1: 1 nF0 x4, 2 nF0F1 x2, 3 x2, 4 x4, 5 x2, 6 x2 (zero bubble from i=1),
  // 7 x2, 8 x2.
  EXPECT_EQ(rows[1],
            "1F0 1F1 1F2 1F3 1F4 6F0 1F5 6F1 6I0 6W0 6F2 6I1 6W1 6F3 "
            "(1F6;6B2)OVERLAP_F_B (6F4;1B0)OVERLAP_F_B (1F7;6B3)OVERLAP_F_B (6F5;1B1)OVERLAP_F_B "
            "(1F8;6B4)OVERLAP_F_B (6F6;1B2)OVERLAP_F_B (1F9;6B5)OVERLAP_F_B (6F7;1B3)OVERLAP_F_B "
            "6B6 (6F8;1B4)OVERLAP_F_B 6B7 (6F9;1B5)OVERLAP_F_B 6B8 1B6 6I9 1I7 6W9 1I8 1W7 1I9 "
            "1W8 1W9");
}

TEST(Golden, GPipeAndInterleaved) {
  EXPECT_EQ(Rows(Build("gpipe", 2, 3).rank_actions),
            (std::vector<std::string>{"0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1F1 1F2 1B0 1B1 1B2"}));
  // Megatron: rank 0 warms up 2(R-1) + (V-1)R = 4 forwards, backwards sweep chunks in
  // reverse.
  EXPECT_EQ(Rows(Build("interleaved1f1b", 2, 4, 2).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
                "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3",
            }));
}

TEST(Golden, ZBV_2Ranks_4Microbatches) {
  // Rank r holds stage r (chunk 0, down) and 3-r (chunk 1, up); n = max(2R-1, M) = 4.
  // Rank 0: 1 nF0 x3: 0F0 0F1 0F2 | 2 nF1F0 x0 | 3 nF1I1W1 x2: 3F0 3I0 3W0 3F1 3I1 3W1 |
  //   4 steady F0 I0 W0 F1 I1 W1 until F1 has caught up with F0 (F0 stops at 4):
  //   0F3 0I0 0W0 3F2 3I2 3W2, 0I1 0W1 3F3 3I3 3W3 | 5 nI0I1 x0 | 6 nI0W0 x2: 0I2 0W2 0I3
  //   0W3 | 7 nothing left to drain.
  // Rank 1: 1 x1: 1F0 | 2 x1: 2F0 1F1 | 3 x1: 2F1 2I0 2W0 | 4: 1F2 1I0 1W0 2F2 2I1 2W1,
  //   1F3 1I1 1W1 2F3 2I2 2W2 | 5 x1: 1I2 2I3 | 6 x1: 1I3 1W2 | 7: 2W3, then 1W3.
  EXPECT_EQ(Rows(Build("zbv", 2, 4).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0I0 0W0 3F2 3I2 3W2 0I1 0W1 3F3 3I3 "
                "3W3 0I2 0W2 0I3 0W3",
                "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 2I2 2W2 1I2 "
                "2I3 1I3 1W2 2W3 1W3",
            }));
}

TEST(Golden, ZBV_FewerMicrobatchesThanThePhasesNeed) {
  // M = 2 < 2R-1 = 3: the program is the one for 3 micro-batches with every action of
  // micro-batch 2 dropped. Rank 0: 0F0 0F1 (0F2) | 3F0 3I0 3W0 3F1 3I1 3W1 | steady: 0I0
  //   0W0 (3F2 3I2 3W2) | nI0W0: 0I1 0W1 (0I2 0W2).
  // Rank 1: 1F0 | 2F0 1F1 | 2F1 2I0 2W0 | steady: (1F2) 1I0 1W0 (2F2) 2I1 2W1 | nI0I1: 1I1
  //   (2I2) | nI0W0: (1I2) 1W1 | drain: (2W2) (1W2).
  EXPECT_EQ(Rows(Build("zbv", 2, 2).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 3F0 3I0 3W0 3F1 3I1 3W1 0I0 0W0 0I1 0W1",
                "1F0 2F0 1F1 2F1 2I0 2W0 1I0 1W0 2I1 2W1 1I1 1W1",
            }));
}

TEST(Golden, InterleavedZB_2Ranks_4Microbatches_2Chunks) {
  // Rounds: max(1, 4/2) = 2 of 2 micro-batches. Rank r holds stages r and r+2. The k-th
  // forward runs chunk (k/2)%2, the k-th input grad chunk 1-(k/2)%2.
  // Rank 0: warm-up (2-1)*2 + 1 = 3: 0F0 0F1 2F0 | steady x5 F I W (rank 0 holds no W
  //   back): 2F1 2I0 2W0, 0F2 2I1 2W1, 0F3 0I0 0W0, 2F2 0I1 0W1, 2F3 2I2 2W2 | cool-down:
  //   2I3 2W3, 0I2 0W2, 0I3 0W3.
  // Rank 1: warm-up 2: 1F0 1F1 | steady x6, its first W held back: 3F0 3I0, 3F1 3I1 3W0,
  //   1F2 1I0 3W1, 1F3 1I1 1W0, 3F2 3I2 1W1, 3F3 3I3 3W2 | cool-down: 1I2 3W3, 1I3 1W2 |
  //   drain: 1W3.
  EXPECT_EQ(Rows(Build("interleaved_zb", 2, 4, 2).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 2F0 2F1 2I0 2W0 0F2 2I1 2W1 0F3 0I0 0W0 2F2 0I1 0W1 2F3 2I2 2W2 2I3 "
                "2W3 0I2 0W2 0I3 0W3",
                "1F0 1F1 3F0 3I0 3F1 3I1 3W0 1F2 1I0 3W1 1F3 1I1 1W0 3F2 3I2 1W1 3F3 3I3 3W2 "
                "1I2 3W3 1I3 1W2 1W3",
            }));
}

TEST(Golden, LoopedBFS_2Ranks_3Microbatches_2Chunks) {
  // Every micro-batch through one held stage before the next; backwards from the last held
  // stage, newest micro-batch first.
  EXPECT_EQ(Rows(Build("looped_bfs", 2, 3, 2).rank_actions),
            (std::vector<std::string>{
                "0F0 0F1 0F2 2F0 2F1 2F2 2B2 2B1 2B0 0B2 0B1 0B0",
                "1F0 1F1 1F2 3F0 3F1 3F2 3B2 3B1 3B0 1B2 1B1 1B0",
            }));
}

TEST(Layout, StageOwnershipAndLoss) {
  Schedule dual = Build("dualpipe", 4, 8);
  EXPECT_EQ(dual.num_stages, 4);
  EXPECT_EQ(dual.StageToRanks(1), (std::vector<int>{1, 2}));
  EXPECT_EQ(dual.rank_stages[0], (std::vector<int>{0, 3}));
  EXPECT_EQ(dual.LossRanks(), (std::vector<int>{3, 0}));
  EXPECT_EQ(dual.EntryRank(0), 0);
  EXPECT_EQ(dual.EntryRank(3), 0);
  EXPECT_EQ(dual.EntryRank(4), 3);
  EXPECT_EQ(dual.RankOf(1, 5), 2);

  Schedule v = Build("dualpipev", 3, 6);
  EXPECT_EQ(v.num_stages, 6);
  EXPECT_EQ(v.rank_stages[0], (std::vector<int>{0, 5}));
  EXPECT_EQ(v.rank_stages[2], (std::vector<int>{2, 3}));
  EXPECT_EQ(v.LossRanks(), (std::vector<int>{0}));
  EXPECT_EQ(v.StageToRanks(4), (std::vector<int>{1}));

  Schedule inter = Build("interleaved1f1b", 3, 6, 2);
  EXPECT_EQ(inter.rank_stages[1], (std::vector<int>{1, 4}));
  EXPECT_EQ(inter.LossRanks(), (std::vector<int>{2}));

  // zbv places its chunks in dualpipev's V; the interleaved types loop.
  Schedule zbv = Build("zbv", 3, 6);
  EXPECT_EQ(zbv.num_stages, 6);
  EXPECT_EQ(zbv.rank_stages[0], (std::vector<int>{0, 5}));
  EXPECT_EQ(zbv.rank_stages[2], (std::vector<int>{2, 3}));
  EXPECT_EQ(zbv.LossRanks(), (std::vector<int>{0}));
  for (const std::string type : {"interleaved_zb", "looped_bfs"}) {
    Schedule looped = Build(type, 3, 6, 3);
    EXPECT_EQ(looped.num_stages, 9) << type;
    EXPECT_EQ(looped.rank_stages[1], (std::vector<int>{1, 4, 7})) << type;
    EXPECT_EQ(looped.LossRanks(), (std::vector<int>{2})) << type;
  }
}

TEST(Request, PyTorchSpellingsNameTheSameTypes) {
  EXPECT_EQ(*CanonicalType("ZBVZeroBubble"), "zbv");
  EXPECT_EQ(*CanonicalType("ZB-V"), "zbv");
  EXPECT_EQ(*CanonicalType("InterleavedZeroBubble"), "interleaved_zb");
  EXPECT_EQ(*CanonicalType("interleaved-zb"), "interleaved_zb");
  EXPECT_EQ(*CanonicalType("LoopedBFS"), "looped_bfs");
  EXPECT_EQ(*CanonicalType("looped_bfs"), "looped_bfs");
}

TEST(Lower, InsertsMessagesOnlyAcrossRanks) {
  Schedule v = Build("dualpipev", 2, 4);
  std::vector<std::string> rows = Rows(v.Lower());
  // Rank 1 holds stages 1 and 2: 1F0 feeds 2F0 locally, so no message between them.
  EXPECT_EQ(rows[1].find("1SEND_F0"), std::string::npos);
  EXPECT_NE(rows[1].find("1RECV_F0"), std::string::npos);  // from rank 0
  EXPECT_NE(rows[1].find("2SEND_F0"), std::string::npos);  // to rank 0 (stage 3)
  EXPECT_NE(rows[0].find("3RECV_F0"), std::string::npos);
  EXPECT_EQ(rows[0].find("REDUCE_GRAD"), std::string::npos);
  // The first receive is posted before the compute action that precedes its consumer.
  std::vector<Action> r1 = v.Lower()[1];
  EXPECT_EQ(r1[0], Action::Comm(ActionType::kRecvF, 1, 0, 0));

  Schedule dual = Build("dualpipe", 2, 4);
  std::vector<Action> r0 = dual.Lower()[0];
  for (const Action& a : r0) {
    if (a.IsComm()) {
      EXPECT_EQ(a.peer_rank, 1) << ToString(a);
    }
  }
}

// DualPipe's REDUCE_GRAD of a stage comes once per rank and replica, right after the rank's
// last action that adds to the stage's weight gradients and that action's sends: nothing adds
// to them after it, and the exchange is posted while compute remains (stage 1's on rank 0
// here, whose stage-0 backward work runs last).
TEST(Lower, DualPipeReducesEachStageRightAfterItsLastWeightGradient) {
  for (const auto& [ranks, mbs] : {std::pair{2, 4}, std::pair{2, 6}, std::pair{4, 8}}) {
    SCOPED_TRACE(::testing::Message() << ranks << " ranks, " << mbs << " micro-batches");
    const Schedule dual = Build("dualpipe", ranks, mbs);
    const std::vector<std::vector<Action>> lowered = dual.Lower();
    for (int r = 0; r < ranks; ++r) {
      const std::vector<Action>& list = lowered[r];
      for (int st : dual.rank_stages[r]) {
        int reduces = 0;
        size_t at = 0, last_grad = 0;
        for (size_t i = 0; i < list.size(); ++i) {
          const Action& a = list[i];
          if (a.type == ActionType::kReduceGrad && a.stage_idx == st) ++reduces, at = i;
          if (a.WeightGradStage() == st) last_grad = i;  // Action.WeightGradStage... tests it
        }
        ASSERT_EQ(reduces, 1) << "rank " << r << " stage " << st;
        EXPECT_GT(at, last_grad) << "rank " << r << " stage " << st;
        for (size_t i = last_grad + 1; i < at; ++i) {  // only its sends (or another reduce)
          EXPECT_TRUE(list[i].type == ActionType::kSendF || list[i].type == ActionType::kSendB ||
                      list[i].type == ActionType::kReduceGrad)
              << "rank " << r << " stage " << st << ": " << ToString(list[i]);
        }
        EXPECT_EQ(list[at].peer_rank, dual.StageToRanks(st)[0] == r ? dual.StageToRanks(st)[1]
                                                                    : dual.StageToRanks(st)[0]);
      }
    }
  }
  const std::vector<Action> r0 = Build("dualpipe", 2, 4).Lower()[0];
  const auto reduce1 =
      std::find(r0.begin(), r0.end(), Action::Comm(ActionType::kReduceGrad, 1, -1, 1));
  ASSERT_NE(reduce1, r0.end());
  EXPECT_TRUE(std::any_of(reduce1, r0.end(), [](const Action& a) { return !a.IsComm(); }))
      << "stage 1's exchange is posted after rank 0's last compute action";
}

TEST(Request, InvalidRequestsSayWhy) {
  struct Case {
    ScheduleRequest request;
    std::string message;
  };
  const Case cases[] = {
      {{"dualpipe", 3, 12}, "even number of ranks"},
      {{"dualpipe", 4, 6}, ">= 2*ranks"},
      {{"dualpipe", 4, 9}, "even number of micro-batches"},
      {{"dualpipev", 4, 7}, ">= 2*ranks (8)"},
      {{"interleaved1f1b", 4, 6, 2}, "divisible by ranks"},
      {{"1f1b", 4, 8, 2}, "only interleaved1f1b, interleaved_zb and looped_bfs take chunks"},
      {{"zbv", 4, 8, 2}, "take chunks > 1; zbv got 2"},
      {{"interleaved_zb", 4, 9, 2}, "divisible by the number of rounds"},
      {{"1f1b", 0, 8}, "ranks must be"},
      {{"gpipe", 2, 0}, "micro-batches must be"},
      {{"interleaved1f1b", 2, 4, 0}, "chunks must be"},
      {{"pipedream", 2, 4}, "unknown schedule type 'pipedream'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Schedule> s = BuildSchedule(c.request);
    ASSERT_FALSE(s.ok()) << c.request.type;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.message), std::string::npos) << s.status();
  }
  EXPECT_TRUE(BuildSchedule({"Interleaved-1F1B", 2, 4, 2}).ok());
}

}  // namespace
}  // namespace xhc::scheduler
