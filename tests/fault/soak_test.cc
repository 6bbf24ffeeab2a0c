// A soak of repeated kills: one `xhc launch` job, a random worker SIGKILLed at a random time
// after each recovery, XHC_SOAK_KILLS times in a row (3 in the default run, 20 in
// //tests/fault:soak_20_test, tagged manual + soak). The job must end bit-identical to the
// uninterrupted run (final checkpoint and every step's losses). Printed per kill: the victim,
// the step it died in, detection time (kill -> the controller's "failure detected"),
// recovery time (kill -> "recovered in", and the controller's own figure) and the steps of
// work lost (redone from the checkpoint). The kill times and victims come from the printed
// seed (XHC_TEST_SEED reproduces them; base/test_seed.h).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/test_seed.h"
#include "gtest/gtest.h"
#include "tests/fault/fault_job.h"
#include "tests/util/run_util.h"

#ifndef XHC_SOAK_KILLS
#define XHC_SOAK_KILLS 3
#endif

namespace xhc::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kKills = XHC_SOAK_KILLS;
// Room for every kill: each cycle (up to 0.8 s of waiting, a ~0.4 s recovery, up to 10
// redone steps) costs about 100 steps at ~12 ms a step, and the job must still be running
// when the last kill lands.
constexpr int kSteps = 200 + 150 * kKills;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The text after the n-th (0-based) occurrence of `what`, to the end of its line.
std::string NthLine(const std::string& text, const std::string& what, int n) {
  size_t at = text.find(what);
  for (int i = 0; i < n && at != std::string::npos; ++i) at = text.find(what, at + 1);
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

// Waits until `what` occurs more than `seen` times in the log; seconds since t0, or -1.
double WaitForCount(const std::string& log, const std::string& what, int seen, Clock::time_point t0,
                    double timeout_s) {
  while (Since(t0) < timeout_s) {
    if (Count(ReadText(log), what) > seen) return Since(t0);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return -1;
}

TEST(Soak, JobSurvivesRepeatedKillsBitIdentically) {
  const uint64_t seed = TestSeed();
  std::mt19937 rng(static_cast<uint32_t>(seed));
  const std::string dir = FreshDir("soak");
  const std::string config = FaultJobConfig(dir, "1f1b", kSteps, /*max_restarts=*/kKills + 5);
  const std::string ref = dir + "/ref", log = dir + "/ref.log";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", config, " --out ", ref), log),
            0)
      << ReadText(log);
  const std::string want = CheckpointFingerprint(ref, kSteps);
  ASSERT_FALSE(want.empty()) << "the uninterrupted run did not commit its final step";

  const std::string run = dir + "/killed", job_log = run + ".log";
  const int job = StartBackground(
      absl::StrCat(XhcBinary(), " launch --config ", config, " --out ", run), job_log);
  ASSERT_TRUE(WaitForStep(run, 5 + static_cast<int>(rng() % 20))) << ReadText(job_log);
  int delivered = 0;
  double total_lost = 0;
  for (int k = 0; k < kKills; ++k) {
    // A random moment after the previous recovery: mid-step, mid-checkpoint or idle.
    std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 800));
    const std::vector<int> pids = WaitForWorkers(run);
    ASSERT_FALSE(pids.empty()) << "no live worker for kill " << k + 1 << "\n" << ReadText(job_log);
    const int victim = pids[rng() % pids.size()];
    const auto killed_at = Clock::now();
    ASSERT_EQ(kill(victim, SIGKILL), 0) << "kill " << k + 1;
    ++delivered;
    const double detect_s = WaitForCount(job_log, "failure detected at step", k, killed_at, 60);
    ASSERT_GE(detect_s, 0) << "kill " << k + 1 << " never detected\n" << ReadText(job_log);
    const double recover_s = WaitForCount(job_log, "recovered in", k, killed_at, 120);
    ASSERT_GE(recover_s, 0) << "kill " << k + 1 << " never recovered\n" << ReadText(job_log);
    const std::string text = ReadText(job_log);
    ASSERT_EQ(Count(text, "failure detected at step"), k + 1)
        << "one kill, one detection (a kill landed on a job already finished or recovering)\n"
        << text;
    const std::string detected = NthLine(text, "failure detected at step", k);
    const std::string recovered = NthLine(text, "recovered in", k);
    const int failed_step =
        std::atoi(detected.c_str() + std::string("failure detected at step ").size());
    const size_t lost_at = recovered.rfind("; ");
    const int lost = lost_at == std::string::npos ? -1 : std::atoi(recovered.c_str() + lost_at + 2);
    total_lost += lost;
    std::printf(
        "kill %2d/%d: pid %d in step %d; detected %.3f s, recovered %.3f s after the kill "
        "(controller: %s); %d step(s) redone\n",
        k + 1, kKills, victim, failed_step, detect_s, recover_s,
        recovered.substr(0, recovered.find(':')).c_str(), lost);
    std::fflush(stdout);
    ASSERT_EQ(ReadText(run + "/metrics.jsonl").find(absl::StrCat("\"step\": ", kSteps, ",")),
              std::string::npos)
        << "the job finished before kill " << k + 2 << " (make kSteps larger)";
  }
  ASSERT_EQ(WaitForExit(job, 600), 0) << ReadText(job_log);
  std::printf(
      "soak: %d kills delivered (XHC_TEST_SEED=%llu), %.0f steps redone in all, job of %d steps "
      "finished\n",
      delivered, static_cast<unsigned long long>(TestBaseSeed()), total_lost, kSteps);
  EXPECT_EQ(delivered, kKills);
  EXPECT_EQ(Count(ReadText(job_log), "recovered in"), kKills) << ReadText(job_log);
  EXPECT_TRUE(CheckpointFingerprint(run, kSteps) == want)
      << "final parameters differ after " << delivered << " kills";
  EXPECT_EQ(CommittedMicrobatchLosses(run), CommittedMicrobatchLosses(ref));
}

}  // namespace
}  // namespace xhc::testing
