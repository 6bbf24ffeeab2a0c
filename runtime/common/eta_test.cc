#include "runtime/common/eta.h"

#include "gtest/gtest.h"

namespace xhc {
namespace {

// Training steps of 1 s, evaluation steps of 6 s (every 10 steps and the last, of 35).
double StepSeconds(int64_t done) { return (done % 10 == 0 || done == 35) ? 6.0 : 1.0; }

TEST(EtaEstimator, StaysStableAcrossEvaluationSteps) {
  EtaEstimator eta(35, 10);
  double previous = -1;
  for (int64_t done = 1; done <= 35; ++done) {
    eta.Add(done, StepSeconds(done), done % 10 == 0 || done == 35);
    const double left = eta.SecondsLeft(done);
    // Exact once an evaluation was seen: the true remaining time.
    double truth = 0;
    for (int64_t d = done + 1; d <= 35; ++d) truth += StepSeconds(d);
    if (done >= 10) {
      EXPECT_NEAR(left, truth, 1e-9) << "after step " << done;
    }
    // Never jumps up at an evaluation step (a last-step-times-steps-left estimate does, 6x).
    if (previous >= 0 && done >= 11) {
      EXPECT_LE(left, previous + 1e-9) << "after step " << done;
    }
    previous = left;
  }
  EXPECT_EQ(eta.SecondsLeft(35), 0.0);
}

TEST(EtaEstimator, NoEvaluations) {
  EtaEstimator eta(10, 0);
  eta.Add(1, 2.0, false);
  EXPECT_DOUBLE_EQ(eta.SecondsLeft(1), 2.0 * 9);  // one step: all there is to go by
  eta.Add(2, 4.0, false);
  eta.Add(3, 6.0, false);
  EXPECT_DOUBLE_EQ(eta.SecondsLeft(3), 5.0 * 7);  // the mean of the steps after the first
}

// The first step pays the warm-up; the ETA after the second already follows the steady steps.
TEST(EtaEstimator, FirstStepsWarmUpDoesNotInflateTheEstimate) {
  EtaEstimator eta(400, 40);
  eta.Add(1, 0.45, false);
  for (int64_t done = 2; done <= 10; ++done) {
    eta.Add(done, 0.25, false);
    EXPECT_NEAR(eta.SecondsLeft(done), 0.25 * static_cast<double>(400 - done), 1e-9)
        << "after step " << done;
  }
}

TEST(EtaEstimator, Formats) {
  EXPECT_EQ(FormatEta(725), "12m05s");
  EXPECT_EQ(FormatEta(3720), "1h02m");
  EXPECT_EQ(FormatEta(0), "0m00s");
}

}  // namespace
}  // namespace xhc
