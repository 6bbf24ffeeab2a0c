// ReadCpuTimes: CPU burnt by another thread shows as other threads' time, CPU burnt by the
// calling thread (or its OpenMP team) does not.
#include "runtime/worker/cpu_time.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace xhc::worker {
namespace {

// Spins until `seconds` of this thread's CPU have passed (wall time is not CPU time on a
// loaded machine, so the loop checks the thread's own clock).
void BurnCpu(double seconds) {
  const auto thread_cpu = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
  };
  const double start = thread_cpu();
  volatile double sink = 0;
  while (thread_cpu() - start < seconds) sink = sink + 1;
}

TEST(CpuTimeTest, AnotherThreadsCpuIsOtherThreadsTime) {
  const CpuTimes before = ReadCpuTimes();
  std::thread helper([] { BurnCpu(0.2); });
  helper.join();
  const CpuTimes after = ReadCpuTimes();
  EXPECT_GE(OtherThreadsCpu(before, after), 0.18);
  EXPECT_LT(after.team_s - before.team_s, 0.1);
}

TEST(CpuTimeTest, TheCallingThreadsCpuIsTeamTime) {
  const CpuTimes before = ReadCpuTimes();
  BurnCpu(0.2);
  const CpuTimes after = ReadCpuTimes();
  EXPECT_GE(after.team_s - before.team_s, 0.18);
  EXPECT_LT(OtherThreadsCpu(before, after), 0.1);
}

}  // namespace
}  // namespace xhc::worker
