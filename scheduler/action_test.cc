#include "scheduler/action.h"

#include "gtest/gtest.h"

namespace xhc::scheduler {
namespace {

TEST(Action, TokensFollowPyTorch) {
  EXPECT_EQ(ToString(Action::F(0, 3)), "0F3");
  EXPECT_EQ(ToString(Action::I(7, 0)), "7I0");
  EXPECT_EQ(ToString(Action::W(7, 0)), "7W0");
  EXPECT_EQ(ToString(Action::B(2, 11)), "2B11");
  EXPECT_EQ(ToString(Action::Comm(ActionType::kSendF, 3, 1, 4)), "3SEND_F1");
  EXPECT_EQ(ToString(Action::Comm(ActionType::kReduceGrad, 2, -1, 1)), "2REDUCE_GRAD");
  EXPECT_EQ(ToString(Action::FB(Action::F(0, 7), Action::B(7, 3))), "(0F7;7B3)OVERLAP_F_B");
}

TEST(Action, ParseInvertsToString) {
  const Action actions[] = {
      Action::F(0, 3),
      Action::B(12, 40),
      Action::I(7, 0),
      Action::W(7, 0),
      Action::FB(Action::F(0, 7), Action::B(7, 3)),
      Action::Comm(ActionType::kSendF, 3, 1, -1),
      Action::Comm(ActionType::kRecvF, 4, 1, -1),
      Action::Comm(ActionType::kSendB, 4, 2, -1),
      Action::Comm(ActionType::kRecvB, 3, 2, -1),
      Action::Comm(ActionType::kReduceGrad, 2, -1, -1),
  };
  for (const Action& a : actions) {
    absl::StatusOr<Action> parsed = ParseAction(ToString(a));
    ASSERT_TRUE(parsed.ok()) << ToString(a) << ": " << parsed.status();
    EXPECT_EQ(*parsed, a) << ToString(a);
  }
}

TEST(Action, BadTokensAreRejectedWithTheToken) {
  for (const char* bad :
       {"F3", "0X3", "0F", "(0F1;1I0)OVERLAP_F_B", "(0F1)OVERLAP_F_B", "(0F1;1B0"}) {
    absl::StatusOr<Action> parsed = ParseAction(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(Action, OverlapHalves) {
  const Action fb = Action::FB(Action::F(1, 2), Action::B(3, 4));
  EXPECT_TRUE(fb.IsCompute());
  EXPECT_EQ(fb.ForwardHalf(), Action::F(1, 2));
  EXPECT_EQ(fb.BackwardHalf(), Action::B(3, 4));
  EXPECT_TRUE(Action::Comm(ActionType::kRecvB, 0, 0, 1).IsComm());
}

TEST(Action, WeightGradStageIsTheStageWhoseWeightGradientsItAddsTo) {
  EXPECT_EQ(Action::B(2, 0).WeightGradStage(), 2);
  EXPECT_EQ(Action::W(3, 1).WeightGradStage(), 3);
  EXPECT_EQ(Action::FB(Action::F(1, 2), Action::B(4, 0)).WeightGradStage(), 4);
  EXPECT_EQ(Action::F(1, 0).WeightGradStage(), -1);
  EXPECT_EQ(Action::I(1, 0).WeightGradStage(), -1);  // input gradients only
  EXPECT_EQ(Action::Comm(ActionType::kReduceGrad, 1, -1, 0).WeightGradStage(), -1);
}

}  // namespace
}  // namespace xhc::scheduler
