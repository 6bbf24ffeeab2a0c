// The executor on a device whose streams are threads with seeded random delays (HostDevice):
// every schedule gives the CPU path's losses and weights bit for bit however the delays fall;
// a missing wait for a received input is caught by that same comparison (the mutation is
// made, and the test sees it); and the copy stream's transfers run while compute runs, as the
// events' timestamps show.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/test_seed.h"
#include "gtest/gtest.h"
#include "runtime/device/host_device.h"
#include "runtime/worker/pipeline_test_util.h"
#include "runtime/worker/stage_executor.h"

namespace xhc::worker {
namespace {

// Each rank's device: delays up to `max_delay_us` on every stream, from (seed, rank).
DeviceFactory HostDevices(uint64_t seed, int64_t max_delay_us,
                          std::map<std::string, device::DelayRange, std::less<>> per_stream = {}) {
  return [=](int rank) -> std::unique_ptr<device::Device> {
    device::HostDeviceOptions o;
    o.seed = seed * 1000003 + rank;
    o.max_delay_us = max_delay_us;
    o.stream_delays = per_stream;
    return std::make_unique<device::HostDevice>(o);
  };
}

struct Case {
  std::string schedule;
  int ranks;
  int chunks = 1;
  std::string stage_layers = "";
  int data_parallel = 1;
};

TEST(StageExecutorOnDevice, EveryScheduleMatchesTheCpuPathBitForBit) {
  const uint64_t seed = testing::TestSeed();
  for (const Case& c : std::vector<Case>{{"gpipe", 2},
                                         {"1f1b", 4},
                                         {"interleaved1f1b", 2, 2},
                                         {"zb1p", 2},
                                         {"dualpipe", 4},
                                         {"dualpipev", 2},
                                         {"dualpipev", 2, 1, "first_stage_layers: 3"},
                                         {"1f1b", 2, 1, "", 2}}) {
    SCOPED_TRACE(absl::StrCat(c.schedule, " on ", c.ranks, " ranks x ", c.data_parallel, " ",
                              c.stage_layers));
    const Config config = MakeConfig("{type: xhc, n_streams: 4, n_active: 2, n_fixed: 1}",
                                     c.schedule, c.chunks, c.stage_layers);
    const RunResult want = RunPipeline(config, c.ranks, c.data_parallel);
    for (const absl::Status& e : want.errors) ASSERT_TRUE(e.ok()) << e;
    const RunResult got =
        RunPipeline(config, c.ranks, c.data_parallel, HostDevices(seed, /*max_delay_us=*/300));
    for (const absl::Status& e : got.errors) ASSERT_TRUE(e.ok()) << e;
    ExpectSameRun(want, got);
    EXPECT_TRUE(got.replica_mismatches.empty());
  }
}

TEST(StageExecutorOnDevice, AMissingWaitForAReceivedInputIsCaught) {
#if defined(__SANITIZE_THREAD__)
  // The mutation is a data race by construction; ThreadSanitizer reports it as one (which is
  // the other way this bug is caught) and stops the process.
  GTEST_SKIP() << "the missing-wait mutation is a deliberate race: run without ThreadSanitizer";
#endif
  const uint64_t seed = testing::TestSeed();
  const Config config = MakeConfig("{type: xhc, n_streams: 4, n_active: 2, n_fixed: 1}", "1f1b", 1);
  const RunResult want = RunPipeline(config, 2);
  for (const absl::Status& e : want.errors) ASSERT_TRUE(e.ok()) << e;
  // The copy stream 20-30 ms behind every op, compute at full speed: without its wait, a stage
  // reads its input before the copy has put it there.
  const auto slow_copies = HostDevices(seed, 0, {{"copy", {20000, 30000}}});
  const RunResult with_wait = RunPipeline(config, 2, 1, slow_copies);
  for (const absl::Status& e : with_wait.errors) ASSERT_TRUE(e.ok()) << e;
  EXPECT_EQ(FirstRunDifference(want, with_wait), "") << "with its waits the device run must match";
  const RunResult without =
      RunPipeline(config, 2, 1, slow_copies, [](StageExecutor& e) { e.DropInputWaitForTest(); });
  bool failed = false;
  for (const absl::Status& e : without.errors) failed |= !e.ok();
  EXPECT_TRUE(failed || !FirstRunDifference(want, without).empty())
      << "a run that skips the wait for its received inputs matched the CPU path: the "
         "comparison the schedules rely on would not catch a missing wait";
}

TEST(StageExecutorOnDevice, TransfersOverlapCompute) {
  const uint64_t seed = testing::TestSeed();
  const Config config = MakeConfig("{type: xhc, n_streams: 4, n_active: 2, n_fixed: 1}", "1f1b", 1);
  // Every stream operation delayed: 6-8 ms on the compute streams (each op's span holds two
  // such delays), 4-5 ms on the copy stream. Rank 0 then sends F0's state (from about 4 ms
  // after F0 ends, for about 12 ms) while F1 computes (from at most 8 ms after F0 ends): they
  // overlap if the executor lets the copy stream run beside compute, never if it makes
  // compute wait for its sends.
  const RunResult got = RunPipeline(
      config, 2, 1,
      HostDevices(
          seed, 0,
          {{"compute", {6000, 8000}}, {"compute-b", {6000, 8000}}, {"copy", {4000, 5000}}}));
  for (const absl::Status& e : got.errors) ASSERT_TRUE(e.ok()) << e;
  int overlapping = 0, transfers = 0;
  for (const std::vector<proto::Span>& spans : got.spans) {
    for (const proto::Span& t : spans) {
      if (t.track() != 3) continue;
      ++transfers;
      for (const proto::Span& c : spans) {
        if (c.track() != 0) continue;
        const double lo = std::max(t.start_us(), c.start_us());
        const double hi = std::min(t.start_us() + t.dur_us(), c.start_us() + c.dur_us());
        if (hi > lo) {
          ++overlapping;
          break;
        }
      }
    }
  }
  std::printf("%d of %d transfers overlapped a compute op\n", overlapping, transfers);
  EXPECT_GT(transfers, 0);
  EXPECT_GT(overlapping, 0) << "no transfer on the copy stream ran while compute ran";
}

}  // namespace
}  // namespace xhc::worker
