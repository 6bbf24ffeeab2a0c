// Fault injection with real processes and real signals: workers killed with SIGKILL at random
// points (several times per job), a worker hung with SIGSTOP, a worker killed in the middle
// of a checkpoint, corrupted checkpoints, and the controller itself killed and resumed. Every
// recovered job must end bit-identical to an uninterrupted one. None of it can pass vacuously:
// both runs must reach the final step with a non-empty fingerprint, the faults must actually
// be delivered (counted), and every wait that times out fails the test. The random kill points
// come from a printed seed (XHC_TEST_SEED reproduces them; see base/test_seed.h).
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/test_seed.h"
#include "gtest/gtest.h"
#include "tests/fault/fault_job.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {
namespace fs = std::filesystem;

// Long enough that a job on an idle machine (about 10 ms a step) is still running when a
// fault is injected.
constexpr int kSteps = 200;

std::string Config(const std::string& dir, const std::string& schedule) {
  return FaultJobConfig(dir, schedule, kSteps);
}

std::string FinalState(const std::string& run) { return CheckpointFingerprint(run, kSteps); }

class Fault : public ::testing::Test {
 protected:
  // The uninterrupted run's final-step fingerprint; callers ASSERT it is non-empty, so a run
  // that committed nothing can never match another that committed nothing.
  std::string Reference(const std::string& schedule) {
    const std::string run = dir_ + "/ref_" + schedule;
    EXPECT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", Config(dir_, schedule),
                                      " --out ", run),
                         log_),
              0)
        << ReadText(log_);
    return FinalState(run);
  }
  std::string dir_ = FreshDir("fault"), log_ = dir_ + "/log.txt";
};

TEST_F(Fault, RandomKillsAreRecoveredBitIdentically) {
  constexpr int kKills = 3;  // "several" per job
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed()));
  for (const std::string schedule : {"dualpipev", "1f1b"}) {
    SCOPED_TRACE(schedule);
    const std::string want = Reference(schedule);
    ASSERT_FALSE(want.empty()) << "the uninterrupted run did not commit its final step";
    const std::string run = dir_ + "/killed_" + schedule, job_log = run + ".log";
    const int pid = StartBackground(
        absl::StrCat(XhcBinary(), " launch --config ", Config(dir_, schedule), " --out ", run),
        job_log);
    int kills = 0;
    const int first = 5 + static_cast<int>(rng() % 20);
    ASSERT_TRUE(WaitForStep(run, first)) << "job never reached step " << first << "\n"
                                         << ReadText(job_log);
    for (int round = 0; round < kKills; ++round) {
      // Intervals down to 100 ms: a kill can land while the job is still recovering from the
      // previous one (then the replacement process dies), which must be recovered too.
      if (round > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 600));
      const std::vector<int> pids = WaitForWorkers(run);
      ASSERT_FALSE(pids.empty()) << "no live worker for kill " << round + 1 << "\n"
                                 << ReadText(job_log);
      if (kill(pids[rng() % pids.size()], SIGKILL) == 0) ++kills;
    }
    ASSERT_EQ(WaitForExit(pid, 240), 0) << ReadText(job_log);
    EXPECT_EQ(kills, kKills) << "SIGKILLs delivered";
    EXPECT_NE(ReadText(job_log).find("recovered in"), std::string::npos) << ReadText(job_log);
    EXPECT_TRUE(FinalState(run) == want) << "final parameters differ after " << kills << " kills";
  }
}

// pid of the job's worker started for world rank `rank` (0 when none is running).
int WorkerPidOfRank(const std::string& run, int rank) {
  const std::string hint = absl::StrCat(" --rank-hint ", rank, " ");
  for (int pid : WorkerPids(run)) {
    std::string cmdline = ReadText(absl::StrCat("/proc/", pid, "/cmdline"));
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(hint) != std::string::npos) return pid;
  }
  return 0;
}

// Data parallelism: 2 replicas of a 2-rank 1F1B pipeline (world ranks 2 and 3 are replica
// 1's). Killing a replica-1 worker is recovered like any other death, and the job ends
// bit-identical to the uninterrupted one-replica job (the replicas' sum is its sum).
TEST_F(Fault, KilledWorkerOfSecondReplicaIsRecoveredBitIdentically) {
  std::mt19937 rng(static_cast<uint32_t>(xhc::testing::TestSeed()));
  const std::string want = Reference("1f1b");
  ASSERT_FALSE(want.empty()) << "the uninterrupted run did not commit its final step";
  const std::string run = dir_ + "/replica", job_log = run + ".log";
  const int pid =
      StartBackground(absl::StrCat(XhcBinary(), " launch --config ", Config(dir_, "1f1b"),
                                   " --data-parallel 2 --out ", run),
                      job_log);
  const int step = 5 + static_cast<int>(rng() % 20), rank = 2 + static_cast<int>(rng() % 2);
  ASSERT_TRUE(WaitForStep(run, step)) << ReadText(job_log);
  const int victim = WorkerPidOfRank(run, rank);
  ASSERT_GT(victim, 0) << "no worker for rank " << rank << "\n" << ReadText(job_log);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_EQ(WaitForExit(pid, 240), 0) << ReadText(job_log);
  const std::string text = ReadText(job_log);
  EXPECT_NE(text.find(absl::StrCat("restarted worker rank ", rank)), std::string::npos) << text;
  EXPECT_NE(text.find("recovered in"), std::string::npos) << text;
  EXPECT_TRUE(FinalState(run) == want) << "final parameters differ after killing rank " << rank;
}

TEST_F(Fault, HungWorkerIsDetectedAndReplaced) {
  constexpr double kHeartbeatTimeout = 1.5;  // fault.heartbeat_timeout in Config
  const std::string want = Reference("1f1b");
  ASSERT_FALSE(want.empty()) << "the uninterrupted run did not commit its final step";
  const std::string run = dir_ + "/hung", job_log = run + ".log";
  const int pid = StartBackground(
      absl::StrCat(XhcBinary(), " launch --config ", Config(dir_, "1f1b"), " --out ", run),
      job_log);
  ASSERT_TRUE(WaitForStep(run, 20)) << ReadText(job_log);
  std::vector<int> pids = WorkerPids(run);
  ASSERT_FALSE(pids.empty());
  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pids.back(), SIGSTOP), 0);
  // Detection is timed by polling the launcher's log: within heartbeat_timeout + 2 s.
  double detected_s = -1;
  while (detected_s < 0) {
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
    if (ReadText(job_log).find("hung: no heartbeat for") != std::string::npos) detected_s = t;
    if (t > 60) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(detected_s, 0) << "hang not reported within 60 s\n" << ReadText(job_log);
  EXPECT_LE(detected_s, kHeartbeatTimeout + 2.0) << "hang detected after " << detected_s << " s";
  ASSERT_EQ(WaitForExit(pid, 240), 0) << ReadText(job_log);
  const std::string text = ReadText(job_log);
  EXPECT_NE(text.find("recovered in"), std::string::npos) << text;
  EXPECT_TRUE(FinalState(run) == want);
}

TEST_F(Fault, KillDuringCheckpointNeverUsesTheHalfWrittenStep) {
  const std::string want = Reference("1f1b");
  ASSERT_FALSE(want.empty()) << "the uninterrupted run did not commit its final step";
  const std::string run = dir_ + "/midckpt", job_log = run + ".log";
  // Each worker holds its written shard unreported for 0.6 s: the step stays uncommitted.
  const int pid =
      StartBackground(absl::StrCat("env XHC_FAULT_CHECKPOINT_DELAY_MS=600 ", XhcBinary(),
                                   " launch --config ", Config(dir_, "1f1b"), " --out ", run),
                      job_log);
  // Wait until step 10's shards exist but its manifest does not, then kill a worker.
  const std::string step10 = run + "/checkpoints/step-000010";
  for (int i = 0; i < 600 && !fs::exists(step10); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(fs::exists(step10));
  EXPECT_FALSE(fs::exists(step10 + "/MANIFEST.json"));
  std::vector<int> pids = WorkerPids(run);
  ASSERT_FALSE(pids.empty());
  ASSERT_EQ(kill(pids.front(), SIGKILL), 0);
  ASSERT_EQ(WaitForExit(pid, 300), 0) << ReadText(job_log);
  const std::string text = ReadText(job_log);
  EXPECT_NE(text.find("resuming from the initial weights"), std::string::npos) << text;
  EXPECT_TRUE(FinalState(run) == want);
}

TEST_F(Fault, CorruptCheckpointsAreNamedAndSkipped) {
  const std::string want = Reference("1f1b");
  ASSERT_FALSE(want.empty()) << "the uninterrupted run did not commit its final step";
  const std::string cfg = Config(dir_, "1f1b");
  const std::string run = dir_ + "/corrupt";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", cfg, " --out ", run), log_),
            0)
      << ReadText(log_);
  const std::string ck = run + "/checkpoints";
  // keep = 3 left steps 180, 190 and 200 (LATEST). Flip a byte of a step-200 shard and
  // truncate step 190's manifest; step 180 stays intact.
  const std::string last = ck + "/step-000200", middle = ck + "/step-000190",
                    oldest = ck + "/step-000180";
  std::string shard;
  for (const auto& e : fs::directory_iterator(last)) {
    if (e.path().extension() == ".safetensors") shard = e.path().string();
  }
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x42');
  }
  fs::resize_file(middle + "/MANIFEST.json", 40);
  const std::string vlog = dir_ + "/verify.log";
  EXPECT_NE(RunCommand(absl::StrCat(XhcBinary(), " ckpt verify ", last), vlog), 0);
  EXPECT_NE(ReadText(vlog).find(fs::path(shard).filename().string()), std::string::npos)
      << ReadText(vlog);
  EXPECT_NE(RunCommand(absl::StrCat(XhcBinary(), " ckpt verify ", middle), vlog), 0);
  EXPECT_NE(ReadText(vlog).find("MANIFEST.json"), std::string::npos);
  EXPECT_EQ(RunCommand(absl::StrCat(XhcBinary(), " ckpt verify ", oldest), vlog), 0);
  // Resume falls back to step 180, warning about each skipped step, and ends exactly like
  // the uninterrupted run (step 200 is written again).
  const std::string rlog = dir_ + "/resume.log";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --resume ", run), rlog), 0)
      << ReadText(rlog);
  EXPECT_NE(ReadText(rlog).find("skipping " + last), std::string::npos) << ReadText(rlog);
  EXPECT_NE(ReadText(rlog).find("continuing from " + oldest), std::string::npos);
  EXPECT_TRUE(FinalState(run) == want);
  // A deleted shard is named too.
  fs::remove(shard);
  EXPECT_NE(RunCommand(absl::StrCat(XhcBinary(), " ckpt verify ", last), vlog), 0);
  EXPECT_NE(ReadText(vlog).find("shard missing"), std::string::npos) << ReadText(vlog);
}

TEST_F(Fault, KilledControllerResumesBitIdentically) {
  const std::string want = Reference("dualpipev");
  ASSERT_FALSE(want.empty()) << "the uninterrupted run did not commit its final step";
  const std::string run = dir_ + "/ctl", job_log = run + ".log";
  const int pid = StartBackground(
      absl::StrCat(XhcBinary(), " launch --config ", Config(dir_, "dualpipev"), " --out ", run),
      job_log);
  for (int i = 0; i < 1000 && !fs::exists(run + "/checkpoints/LATEST"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(run + "/checkpoints/LATEST")) << "no checkpoint within 10 s\n"
                                                       << ReadText(job_log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  WaitForExit(pid, 10);
  // The step the resume must continue from: the newest committed one at the kill.
  std::string latest = ReadText(run + "/checkpoints/LATEST");
  latest.erase(latest.find_last_not_of(" \n") + 1);
  ASSERT_NE(latest, "") << "LATEST is empty";
  ASSERT_LT(latest, absl::StrFormat("step-%06d", kSteps)) << "the job had already finished";
  // The orphaned workers notice the controller is gone and exit on their own.
  for (int i = 0; i < 100 && !WorkerPids(run).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(WorkerPids(run).empty()) << "workers outlived their controller";
  const std::string rlog = dir_ + "/ctl_resume.log";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --resume ", run), rlog), 0)
      << ReadText(rlog);
  EXPECT_NE(ReadText(rlog).find(absl::StrCat("continuing from ", run, "/checkpoints/", latest)),
            std::string::npos)
      << "did not resume from " << latest << "\n"
      << ReadText(rlog);
  EXPECT_TRUE(FinalState(run) == want);
}

}  // namespace
}  // namespace xhc::testing
