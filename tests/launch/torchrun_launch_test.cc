// Workers started the way torchrun or a Kubernetes PyTorchJob starts them: no --controller,
// --rank-hint or token file, only MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE and the
// token in XHC_JOB_TOKEN. They join a real controller, take the ranks RANK names (rank 1
// registers first and still gets rank 1), and train exactly as `xhc train` does; a worker
// whose WORLD_SIZE disagrees with the job's worker count is refused, naming both.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/launch/tiny_job.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

constexpr int kSteps = 3;

// `xhc worker` with torchrun's variables for `rank` of `world` and nothing else.
std::string TorchrunWorker(int port, const std::string& token, int rank, int world) {
  return absl::StrCat("env MASTER_ADDR=127.0.0.1 MASTER_PORT=", port, " RANK=", rank,
                      " WORLD_SIZE=", world, " XHC_JOB_TOKEN=", token, " ", XhcBinary(), " worker");
}

TEST(TorchrunLaunch, WorkersFromTorchrunVariablesJoinAndTrainLikeXhcTrain) {
  const std::string dir = FreshDir("torchrun_launch");
  const std::string config = WriteTinyJob(dir, kSteps);
  absl::StatusOr<std::vector<std::string>> single = SingleProcessLosses(dir, config);
  ASSERT_TRUE(single.ok()) << single.status();
  const std::vector<std::string> want = *single;
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));

  const int port = FreePort();
  const std::string clog = dir + "/controller.log", token_file = dir + "/token";
  const int controller = StartBackground(
      absl::StrCat(XhcBinary(), " controller --config ", config, " --listen 127.0.0.1:", port,
                   " --out ", dir, "/run --token-file ", token_file),
      clog);
  // The controller writes the token file before it listens.
  ASSERT_TRUE(WaitForText(clog, "listening on port", 30)) << ReadText(clog);
  const std::string token = ReadText(token_file).substr(0, ReadText(token_file).find('\n'));

  const std::string refused = dir + "/refused.log";
  EXPECT_NE(RunCommand(TorchrunWorker(port, token, 0, 3), refused), 0);
  EXPECT_NE(ReadText(refused).find("(world size 3 from WORLD_SIZE)"), std::string::npos)
      << ReadText(refused);
  EXPECT_NE(ReadText(refused).find("was started as one of 3 workers, but this job has 2"),
            std::string::npos)
      << ReadText(refused);

  const int w1 = StartBackground(TorchrunWorker(port, token, 1, 2), dir + "/w1.log");
  EXPECT_TRUE(WaitForText(clog, absl::StrCat("(pid ", w1, ", 127.0.0.1) registered as rank 1"), 60))
      << ReadText(clog) << ReadText(dir + "/w1.log");
  const int w0 = StartBackground(TorchrunWorker(port, token, 0, 2), dir + "/w0.log");
  EXPECT_EQ(WaitForExit(controller, 120), 0) << ReadText(clog);
  EXPECT_EQ(WaitForExit(w0, 30), 0) << ReadText(dir + "/w0.log");
  EXPECT_EQ(WaitForExit(w1, 30), 0) << ReadText(dir + "/w1.log");
  EXPECT_NE(ReadText(dir + "/w1.log")
                .find(absl::StrCat("xhc worker: controller 127.0.0.1:", port,
                                   " (from MASTER_ADDR:MASTER_PORT), rank hint 1 (RANK), "
                                   "world 2 (WORLD_SIZE)")),
            std::string::npos)
      << ReadText(dir + "/w1.log");
  const std::vector<std::string> got = MicrobatchLosses(dir + "/run");
  ASSERT_EQ(got.size(), want.size()) << ReadText(clog);
  for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got[s], want[s]) << "step " << s + 1;
}

}  // namespace
}  // namespace xhc::testing
