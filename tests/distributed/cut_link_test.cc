// A cut network link while both ends live. The test process enters its own user + network
// namespace (unprivileged: a user namespace owns the network namespaces it creates), where
// the controller and rank 0 run; rank 1 runs in a nested network namespace joined to it by
// a veth pair. Mid-job the test takes the link down (`ip link set ... down`): rank 1's
// process keeps running but nothing reaches it. The controller must notice within the
// heartbeat timeout, take a replacement for rank 1 and end bit-identical to the
// single-process run. When the link comes back the old worker must be fenced out (its stream
// and reports refused, a new registration from its namespace refused), never a second worker
// for rank 1.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "tests/launch/tiny_job.h"
#include "tests/util/own_network.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kSteps = 300;
constexpr double kHeartbeatTimeoutS = 1.5;
constexpr char kHostIp[] = "10.77.0.1";  // this namespace's end of the veth pair
constexpr char kFarIp[] = "10.77.0.2";   // rank 1's namespace's end
constexpr int kPort = 7070;              // the namespace is ours: every port is free

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Absolute path of a system tool (Bazel's test PATH may lack /sbin), or "".
std::string Tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = dir + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string JobConfig(const std::string& dir) {
  const std::string corpus = dir + "/corpus.txt";
  std::string text;
  for (int i = 0; i < 400; ++i) absl::StrAppend(&text, "links go down; jobs go on ", i, ".\n");
  WriteText(corpus, text);
  const std::string path = dir + "/config.yaml";
  WriteText(
      path,
      absl::StrCat(
          "model: {d_model: 16, n_layers: 4, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 16,\n"
          "        residual: {type: xhc, n_streams: 6, n_active: 3, n_fixed: 1}}\n"
          "optim: {lr: 0.01, warmup_steps: 3}\n"
          "train: {steps: ",
          kSteps,
          ", batch_size: 2, microbatches: 4, seed: 3, eval_every: 0}\n"
          "data: {train: ",
          corpus,
          "}\n"
          "pipeline: {schedule: 1f1b, workers: 2}\n"
          "checkpoint: {every: 10, keep: 3}\n"
          "fault: {heartbeat_timeout: ",
          kHeartbeatTimeoutS, ", step_timeout: 20, max_restarts: 3}\n"));
  return path;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Waits up to timeout_s for `text` in `path`; seconds it took, or -1.
double TimeUntil(const std::string& path, const std::string& text, double timeout_s) {
  const auto t0 = Clock::now();
  while (Since(t0) < timeout_s) {
    if (ReadText(path).find(text) != std::string::npos) return Since(t0);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -1;
}

TEST(CutLink, WorkerBehindADownedLinkIsReplacedAndFencedWhenTheLinkReturns) {
  const std::string dir = FreshDir("cut_link");
  const std::string ip = Tool("ip"), nsenter = Tool("nsenter"), unshare_bin = Tool("unshare");
  if (ip.empty() || nsenter.empty() || unshare_bin.empty()) {
    XHC_SKIP_OR_FAIL(
        "needs ip (iproute2), nsenter and unshare (util-linux); setup.sh installs "
        "iproute2");
  }
  const std::string config = JobConfig(dir);
  // The reference first, outside any namespace games.
  absl::StatusOr<std::vector<std::string>> single = SingleProcessLosses(dir, config);
  ASSERT_TRUE(single.ok()) << single.status();
  ASSERT_EQ(single->size(), static_cast<size_t>(kSteps));
  if (const std::string why = EnterOwnNetwork(); !why.empty()) XHC_SKIP_OR_FAIL(why);

  // The far namespace: held open by a sleeping process, joined by the veth pair vxa | vxb.
  const std::string nslog = dir + "/netns.log";
  const int holder = StartBackground(unshare_bin + " -n sleep 600", nslog);
  ASSERT_GT(holder, 0);
  char mine[64] = {}, theirs[64] = {};
  ASSERT_GT(readlink("/proc/self/ns/net", mine, sizeof(mine) - 1), 0);
  const std::string holder_ns = absl::StrCat("/proc/", holder, "/ns/net");
  for (int i = 0; i < 500; ++i) {
    std::fill(std::begin(theirs), std::end(theirs), 0);
    if (readlink(holder_ns.c_str(), theirs, sizeof(theirs) - 1) > 0 &&
        std::string(theirs) != mine) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_NE(std::string(theirs), std::string(mine)) << "the far namespace never appeared";
  const std::string far = absl::StrCat(nsenter, " -t ", holder, " -n ");
  ASSERT_EQ(
      RunCommand(absl::StrCat(ip, " link set lo up && ", ip,
                              " link add vxa type veth peer name vxb netns ", holder, " && ", ip,
                              " addr add ", kHostIp, "/24 dev vxa && ", ip, " link set vxa up && ",
                              far, ip, " addr add ", kFarIp, "/24 dev vxb && ", far, ip,
                              " link set vxb up && ", far, ip, " link set lo up"),
                 nslog),
      0)
      << ReadText(nslog);

  const std::string run = dir + "/run", clog = dir + "/controller.log", token = dir + "/token";
  const int controller =
      StartBackground(absl::StrCat(XhcBinary(), " controller --config ", config, " --listen ",
                                   kHostIp, ":", kPort, " --out ", run, " --token-file ", token),
                      clog);
  ASSERT_TRUE(WaitForText(clog, "listening on port", 30)) << ReadText(clog);
  auto worker = [&](int rank, const std::string& address) {
    return absl::StrCat(XhcBinary(), " worker --controller ", kHostIp, ":", kPort, " --token-file ",
                        token, " --rank-hint ", rank, " --connect-timeout 10 --advertise-address ",
                        address);
  };
  const int w0 = StartBackground(worker(0, kHostIp), dir + "/w0.log");
  const std::string victim_log = dir + "/w1-cut.log";
  const int victim = StartBackground(far + worker(1, kFarIp), victim_log);
  // Cut mid-job, well after the first checkpoints.
  const std::string step20 = "\"step\": 20,";
  ASSERT_GE(TimeUntil(run + "/metrics.jsonl", step20, 40), 0) << ReadText(clog);
  ASSERT_EQ(RunCommand(ip + " link set vxa down", nslog), 0) << ReadText(nslog);
  const auto cut_at = Clock::now();

  const double detected_s = TimeUntil(clog, "failure detected at step", 30);
  ASSERT_GE(detected_s, 0) << "the cut link was never detected\n" << ReadText(clog);
  EXPECT_LE(detected_s, kHeartbeatTimeoutS + 1.0) << ReadText(clog);
  EXPECT_EQ(kill(victim, 0), 0) << "the cut-off worker must still be running (a cut link, not "
                                   "a dead process)\n"
                                << ReadText(victim_log);
  // No launcher restarts workers of an external controller: the test is the operator.
  ASSERT_GE(TimeUntil(clog, "waiting up to", 30), 0) << ReadText(clog);
  const int w1 = StartBackground(worker(1, kHostIp), dir + "/w1-replacement.log");
  const auto t_replaced = Clock::now();
  while (Count(ReadText(clog), "registered as rank 1") < 2 && Since(t_replaced) < 30) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(Count(ReadText(clog), "registered as rank 1"), 2) << ReadText(clog);
  const double replaced_s = Since(cut_at);

  // The link comes back while the job runs on with the replacement.
  ASSERT_EQ(RunCommand(ip + " link set vxa up", nslog), 0) << ReadText(nslog);
  const auto restored_at = Clock::now();
  // A new worker from the far namespace cannot take a rank either: both are held.
  const std::string rejoin_log = dir + "/rejoin.log";
  EXPECT_NE(RunCommand(far + worker(1, kFarIp), rejoin_log), 0) << ReadText(rejoin_log);
  EXPECT_NE(ReadText(rejoin_log).find("already has its 2 workers"), std::string::npos)
      << ReadText(rejoin_log);
  // The old worker learns it lost rank 1 and leaves on its own.
  const int victim_rc = WaitForExit(victim, 45);
  const double fenced_s = Since(restored_at);
  EXPECT_NE(victim_rc, -1) << "the cut-off worker is still running " << fenced_s
                           << " s after its link came back\n"
                           << ReadText(victim_log);
  EXPECT_NE(victim_rc, 0) << ReadText(victim_log);
  const std::string vtext = ReadText(victim_log);
  EXPECT_TRUE(vtext.find("fenced") != std::string::npos ||
              vtext.find("lost the controller") != std::string::npos)
      << vtext;

  EXPECT_EQ(WaitForExit(controller, 120), 0) << ReadText(clog);
  EXPECT_EQ(WaitForExit(w0, 30), 0) << ReadText(dir + "/w0.log");
  EXPECT_EQ(WaitForExit(w1, 30), 0) << ReadText(dir + "/w1-replacement.log");
  kill(holder, SIGKILL);
  WaitForExit(holder, 5);
  const std::string ctext = ReadText(clog);
  EXPECT_EQ(Count(ctext, "registered as rank 1"), 2) << "rank 1 had more than one replacement";
  EXPECT_EQ(Count(ctext, "recovered in"), 1) << ctext;
  const std::vector<std::string> got = CommittedMicrobatchLosses(run);
  ASSERT_EQ(got.size(), single->size()) << ctext;
  for (int s = 0; s < kSteps; ++s) ASSERT_EQ(got[s], (*single)[s]) << "step " << s + 1;
  EXPECT_TRUE(CheckpointFingerprint(run, kSteps) == CheckpointFingerprint(dir + "/single", kSteps))
      << "final parameters differ from xhc train's";
  EXPECT_FALSE(CheckpointFingerprint(run, kSteps).empty());
  const size_t rec = ctext.find("recovered in");
  std::string last_words = vtext.substr(0, vtext.find_last_not_of('\n') + 1);
  last_words = last_words.substr(last_words.find_last_of('\n') + 1);
  std::printf(
      "cut link: detected %.2f s after the cut (heartbeat timeout %.1f s); replacement "
      "registered %.2f s after the cut; old worker exited (rc %d) %.2f s after the "
      "link came back, saying: %s\n%s\n",
      detected_s, kHeartbeatTimeoutS, replaced_s, victim_rc, fenced_s, last_words.c_str(),
      ctext.substr(rec, ctext.find('\n', rec) - rec).c_str());
}

}  // namespace
}  // namespace xhc::testing
