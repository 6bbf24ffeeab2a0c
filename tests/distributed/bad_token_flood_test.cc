// A flood of bad-token requests at a running job's controller. A tiny 2-worker job trains;
// in every other window of kWindowSteps steps the test sends Status RPCs with a wrong job
// token from this process (kFloodThreads threads, paced to kFloodRate requests a second in
// all: 10 times the per-host bad-token rate the controller allows). The controller must
// refuse every one (UNAUTHENTICATED for the burst, then RESOURCE_EXHAUSTED), and the median
// step time (the controller's step_s in metrics.jsonl: RUN_STEP sent to the last report)
// over the flooded windows must stay within kMaxSlowdown of the median over the quiet ones
// of the same run; both are printed, with the CPU the controller and the flooder spent.
// The job must still end bit-identical to xhc train.
// The flooder stands in for another host, yet runs on the job's own two cores: its own CPU
// (the client, its gRPC threads: 0.3-0.6 s per 4 s of flood) competed with the workers and
// put the ratio anywhere in 1.01-1.36 over 13 runs (one CI run failed at 1.36;
// at 500 requests a second from two threads, 1.31). So once the job is started, this
// process (and every thread it creates after: the flooder and gRPC's) runs under
// SCHED_IDLE: it gets only the CPU the job leaves idle. The controller's refusals still run
// on the job's cores at normal priority: they are what the bound is about. The flood then
// needs the CPU the job leaves idle, which a second test action beside this one takes (a CI
// run flooded at 42 requests a second instead of 200): the target is tagged exclusive.
#include <grpcpp/grpcpp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/median.h"
#include "gtest/gtest.h"
#include "proto/xhc.grpc.pb.h"
#include "tests/launch/tiny_job.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWarmupSteps = 20, kWindowSteps = 25, kWindows = 12;
constexpr int kSteps = kWarmupSteps + kWindowSteps * kWindows + 150;
// This process runs under SCHED_IDLE (below), so on a loaded machine (CI runs two test actions
// at once) it can see each step late, every window then starts later, and the job may end
// before the last windows: those are dropped, and the comparison needs at least this many
// complete windows of each kind (a CI run once ran out of steps in window 12 of 12).
constexpr int kMinWindowsEach = 3;
constexpr int kFloodThreads = 1;
constexpr double kFloodRate = 200;  // requests a second, all threads together
constexpr double kMaxSlowdown = 1.25;

std::string JobConfig(const std::string& dir) {
  const std::string corpus = dir + "/corpus.txt";
  std::string text;
  for (int i = 0; i < 400; ++i) absl::StrAppend(&text, "floods pass; steps stay ", i, ".\n");
  WriteText(corpus, text);
  const std::string path = dir + "/config.yaml";
  WriteText(
      path,
      absl::StrCat(
          "model: {d_model: 16, n_layers: 4, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 16,\n"
          "        residual: {type: xhc, n_streams: 6, n_active: 3, n_fixed: 1}}\n"
          "train: {steps: ",
          kSteps,
          ", batch_size: 2, microbatches: 4, seed: 3, eval_every: 0}\n"
          "data: {train: ",
          corpus,
          "}\n"
          "pipeline: {schedule: 1f1b, workers: 2}\n"
          "checkpoint: {every: 0}\n"));
  return path;
}

// step_s of every step row of metrics.jsonl, by step (index 0 = step 1).
std::vector<double> StepSeconds(const std::string& run) {
  std::vector<double> out;
  std::istringstream in(ReadText(run + "/metrics.jsonl"));
  std::string line;
  const std::string key = "\"step_s\": ";
  while (std::getline(in, line)) {
    const size_t at = line.find(key);
    if (at != std::string::npos && line.find("\"microbatch_losses\"") != std::string::npos) {
      out.push_back(std::atof(line.c_str() + at + key.size()));
    }
  }
  return out;
}

// CPU seconds (user + system) the process `pid` has used so far (0 when unreadable).
double CpuSeconds(int pid) {
  std::istringstream in(ReadText(absl::StrCat("/proc/", pid, "/stat")));
  std::string field;
  double ticks = 0;
  for (int i = 1; in >> field && i <= 15; ++i) {
    if (i == 14 || i == 15) ticks += std::atof(field.c_str());  // utime, stime
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

int LastStep(const std::string& run) { return static_cast<int>(StepSeconds(run).size()); }

bool WaitForStepAtLeast(const std::string& run, int step, double timeout_s) {
  const auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < timeout_s) {
    const int last = LastStep(run);
    if (last >= step) return true;
    if (last >= kSteps) return false;  // the job has ended: no more steps come
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

struct FloodCounts {
  std::atomic<int64_t> sent{0}, unauthenticated{0}, exhausted{0}, other{0};
};

void Flood(const std::string& address, const std::atomic<bool>& stop, FloodCounts* counts) {
  auto stub =
      proto::Controller::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  const auto period = std::chrono::duration<double>(kFloodThreads / kFloodRate);
  auto next = Clock::now();
  while (!stop.load()) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("x-xhc-token", "not-the-job-token");
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    proto::Empty req;
    proto::StatusResponse resp;
    const grpc::Status s = stub->Status(&ctx, req, &resp);
    ++counts->sent;
    if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      ++counts->unauthenticated;
    } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++counts->exhausted;
    } else {
      ++counts->other;
    }
    next += std::chrono::duration_cast<Clock::duration>(period);
    std::this_thread::sleep_until(next);
  }
}

TEST(BadTokenFlood, DoesNotSlowARunningJob) {
  const std::string dir = FreshDir("bad_token_flood");
  const std::string config = JobConfig(dir);
  absl::StatusOr<std::vector<std::string>> single = SingleProcessLosses(dir, config);
  ASSERT_TRUE(single.ok()) << single.status();
  const std::string address = absl::StrCat("127.0.0.1:", FreePort());
  const std::string run = dir + "/run", clog = dir + "/controller.log", token = dir + "/token";
  const int controller =
      StartBackground(absl::StrCat(XhcBinary(), " controller --config ", config, " --listen ",
                                   address, " --out ", run, " --token-file ", token),
                      clog);
  ASSERT_TRUE(WaitForText(clog, "listening on port", 30)) << ReadText(clog);
  const std::string worker =
      absl::StrCat(XhcBinary(), " worker --controller ", address, " --token-file ", token);
  const int w0 = StartBackground(worker, dir + "/w0.log");
  const int w1 = StartBackground(worker, dir + "/w1.log");
  // After the job's processes are started (they must not inherit it), before any gRPC thread.
  const sched_param idle{};
  ASSERT_EQ(sched_setscheduler(0, SCHED_IDLE, &idle), 0) << "SCHED_IDLE: " << errno;
  // Windows of kWindowSteps steps, the flood on in every other one: alternating keeps a
  // change in the machine's other load from passing for the flood's effect.
  ASSERT_TRUE(WaitForStepAtLeast(run, kWarmupSteps, 60)) << ReadText(clog);
  FloodCounts counts;
  std::vector<double> quiet_steps, flooded_steps;               // their step_s, filled at the end
  std::vector<std::pair<int, int>> quiet_ranges, flood_ranges;  // [first, last] step
  double flood_s = 0, quiet_s = 0, controller_cpu = 0, quiet_controller_cpu = 0, self_cpu = 0;
  for (int w = 0; w < kWindows; ++w) {
    const bool flooding = w % 2 == 1;
    std::atomic<bool> stop{false};
    std::vector<std::thread> flooders;
    const auto t0 = Clock::now();
    const double controller_cpu0 = CpuSeconds(controller), self_cpu0 = CpuSeconds(getpid());
    for (int i = 0; flooding && i < kFloodThreads; ++i) {
      flooders.emplace_back([&] { Flood(address, stop, &counts); });
    }
    // The first step that begins inside the window, to the last that ends inside it.
    const int first = LastStep(run) + 2;
    const bool reached = WaitForStepAtLeast(run, first - 1 + kWindowSteps, 60);
    const int last = LastStep(run);
    stop = true;
    for (std::thread& t : flooders) t.join();
    if (!reached) {  // the job ended inside this window (dropped), or it stalled
      ASSERT_EQ(last, kSteps) << "the job stalled at step " << last << "\n" << ReadText(clog);
      break;
    }
    (flooding ? flood_ranges : quiet_ranges).push_back({first, last});
    const double window_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (flooding) {
      flood_s += window_s;
      controller_cpu += CpuSeconds(controller) - controller_cpu0;
      self_cpu += CpuSeconds(getpid()) - self_cpu0;
    } else {
      quiet_s += window_s;
      quiet_controller_cpu += CpuSeconds(controller) - controller_cpu0;
    }
  }
  EXPECT_EQ(WaitForExit(controller, 120), 0) << ReadText(clog);
  EXPECT_EQ(WaitForExit(w0, 30), 0) << ReadText(dir + "/w0.log");
  EXPECT_EQ(WaitForExit(w1, 30), 0) << ReadText(dir + "/w1.log");

  const std::vector<double> step_s = StepSeconds(run);
  ASSERT_EQ(step_s.size(), static_cast<size_t>(kSteps));
  ASSERT_GE(quiet_ranges.size(), static_cast<size_t>(kMinWindowsEach))
      << "too few complete quiet windows: this SCHED_IDLE process saw the steps too late";
  ASSERT_GE(flood_ranges.size(), static_cast<size_t>(kMinWindowsEach))
      << "too few complete flooded windows: this SCHED_IDLE process saw the steps too late";
  for (const auto& [first, last] : quiet_ranges) {
    for (int s = first; s <= last; ++s) quiet_steps.push_back(step_s[s - 1]);
  }
  for (const auto& [first, last] : flood_ranges) {
    for (int s = first; s <= last; ++s) flooded_steps.push_back(step_s[s - 1]);
  }
  const double base = Median(quiet_steps), flooded = Median(flooded_steps);
  std::printf(
      "bad-token flood: %lld requests in %.1f s of flood (%.0f/s, %d threads): %lld "
      "UNAUTHENTICATED, %lld RESOURCE_EXHAUSTED, %lld other\n"
      "bad-token flood: median step time %.2f ms over %zu steps without, %.2f ms over "
      "%zu steps with the flood (ratio %.3f, bound %.2f), %d complete alternating windows\n"
      "bad-token flood: controller CPU %.2f s in %.1f s of flood, %.2f s in %.1f s "
      "without; flooding client (SCHED_IDLE) %.2f s\n",
      static_cast<long long>(counts.sent.load()), flood_s, counts.sent / flood_s, kFloodThreads,
      static_cast<long long>(counts.unauthenticated.load()),
      static_cast<long long>(counts.exhausted.load()), static_cast<long long>(counts.other.load()),
      base * 1e3, quiet_steps.size(), flooded * 1e3, flooded_steps.size(), flooded / base,
      kMaxSlowdown, static_cast<int>(quiet_ranges.size() + flood_ranges.size()), controller_cpu,
      flood_s, quiet_controller_cpu, quiet_s, self_cpu);
  EXPECT_EQ(counts.other.load(), 0) << "every flood request must be refused";
  EXPECT_GT(counts.exhausted.load(), counts.unauthenticated.load())
      << "the per-host bound never engaged";
  EXPECT_GT(counts.sent.load(), 0.5 * kFloodRate * flood_s) << "the flood was not a flood";
  EXPECT_LE(flooded, kMaxSlowdown * base);
  EXPECT_EQ(CommittedMicrobatchLosses(run), *single) << "the flood changed the training";
}

}  // namespace
}  // namespace xhc::testing
