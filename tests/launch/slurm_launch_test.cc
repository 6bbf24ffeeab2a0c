// examples/slurm/xhc.sbatch on a real one-node Slurm cluster (slurm_cluster.h): `sbatch
// --wait` runs the controller in the batch step and `srun`s 2 workers that find the
// controller, their rank and the world size from Slurm's variables alone; the job's
// per-step micro-batch losses equal `xhc train`'s on the same config bit for bit. Skips,
// saying why, where slurmctld / slurmd are not installed or the test is not root. The same
// 2 tasks submitted with XHC_DATA_PARALLEL=2 (2 replicas of a 1-rank pipeline) match too.
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "tests/launch/slurm_cluster.h"
#include "tests/launch/tiny_job.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {
namespace fs = std::filesystem;

constexpr int kSteps = 3;

std::string SbatchScript() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "",
                      "/examples/slurm/xhc.sbatch");
}

// The cluster's folder: short, under /tmp (slurmd puts step sockets in its spool folder,
// and a socket path must fit in 108 bytes, which TEST_TMPDIR does not), removed at the end.
struct ShortTempDir {
  std::string path;
  ShortTempDir() {
    char tmpl[] = "/tmp/xhc-slurm-XXXXXX";
    path = mkdtemp(tmpl) != nullptr ? tmpl : "";
  }
  ~ShortTempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

TEST(SlurmLaunch, SbatchExampleTrainsLikeXhcTrain) {
  if (const std::string why = SlurmUnavailableReason(); !why.empty()) XHC_SKIP_OR_FAIL(why);
  const auto start = std::chrono::steady_clock::now();
  const std::string dir = FreshDir("slurm_launch");
  const std::string config = WriteTinyJob(dir, kSteps);
  absl::StatusOr<std::vector<std::string>> single = SingleProcessLosses(dir, config);
  ASSERT_TRUE(single.ok()) << single.status();
  const std::vector<std::string> want = *single;
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));

  ShortTempDir cluster_dir;
  ASSERT_FALSE(cluster_dir.path.empty());
  absl::StatusOr<std::unique_ptr<SlurmCluster>> cluster = SlurmCluster::Start(cluster_dir.path, 2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string job_out = dir + "/job.out", run = dir + "/run";
  const int port = FreePort();
  // The environment sbatch exports to the job: which binary, and the controller's port.
  // No XHC_CONTROLLER: workers must find the controller from SLURM_JOB_NODELIST.
  const ToolResult r =
      (*cluster)->Run({"sbatch", "--wait", "--ntasks=2", "--time=3", "--output=" + job_out,
                       "--chdir=" + dir, SbatchScript(), config, run},
                      150, {{"XHC_BIN", XhcBinary()}, {"XHC_CONTROLLER_PORT", absl::StrCat(port)}});
  const std::string job_log = ReadText(job_out);
  ASSERT_EQ(r.exit_code, 0) << "sbatch: " << r.output << "\njob output:\n"
                            << job_log << (*cluster)->Logs();
  // Each worker says where its controller, rank and world came from.
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(job_log.find(absl::StrCat("xhc worker: controller ", (*cluster)->node(), ":", port,
                                        " (from first host of SLURM_JOB_NODELIST + "
                                        "XHC_CONTROLLER_PORT), rank hint ",
                                        rank, " (SLURM_PROCID), world 2 (SLURM_NTASKS)")),
              std::string::npos)
        << job_log;
  }
  const std::vector<std::string> got = MicrobatchLosses(run);
  ASSERT_EQ(got.size(), want.size()) << job_log;
  for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got[s], want[s]) << "step " << s + 1;
  // The same 2 tasks as XHC_DATA_PARALLEL=2 replicas of a 1-rank pipeline: same losses.
  const std::string dp_out = dir + "/job_dp.out", dp_run = dir + "/run_dp";
  const ToolResult dp =
      (*cluster)->Run({"sbatch", "--wait", "--ntasks=2", "--time=3", "--output=" + dp_out,
                       "--chdir=" + dir, SbatchScript(), config, dp_run},
                      150,
                      {{"XHC_BIN", XhcBinary()},
                       {"XHC_CONTROLLER_PORT", absl::StrCat(FreePort())},
                       {"XHC_DATA_PARALLEL", "2"}});
  const std::string dp_log = ReadText(dp_out);
  ASSERT_EQ(dp.exit_code, 0) << "sbatch: " << dp.output << "\njob output:\n" << dp_log;
  EXPECT_NE(dp_log.find("replica 1 of 2"), std::string::npos) << dp_log;
  EXPECT_EQ(MicrobatchLosses(dp_run), want) << dp_log;
  cluster->reset();  // stops the daemons: part of the time this test takes
  std::printf(
      "Slurm job of %d steps on 2 workers (and as 2 replicas): losses %s; cluster + "
      "jobs + xhc train %.1f s\n",
      kSteps, got == want ? "bit-identical to xhc train" : "DIFFER",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace
}  // namespace xhc::testing
