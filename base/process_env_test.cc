// MaybeReexecWithTunedEnv (process_env.h) in real processes: this binary re-runs itself with
// XHC_ENV_PROBE set, in an environment the test chooses, and the probe prints what it has
// after the call (re-exec included). Checks the promise of docs/benchmarks.md, "CPU notes": a
// preset OPENBLAS_CORETYPE, OMP_WAIT_POLICY or glibc.malloc.hugetlb is kept, unset ones are
// filled in for this CPU (the tunable appended to the user's others), XHC_BLAS_AUTOTUNE=0
// leaves the environment alone; and the probe's large heap blocks then sit in memory that may
// take transparent huge pages.

#include "base/process_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace xhc {
namespace {

std::string SelfPath() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Runs the probe (XHC_ENV_PROBE=mode) under `env -u <the variables> <assignments>` and returns
// its one line.
std::string Probe(const std::string& assignments, const std::string& mode = "env") {
  const std::string cmd =
      "env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY -u XHC_BLAS_AUTOTUNE -u GLIBC_TUNABLES " +
      assignments + " XHC_ENV_PROBE=" + mode + " '" + SelfPath() + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  char line[512] = {};
  const bool got = fgets(line, sizeof(line), p) != nullptr;
  const int rc = pclose(p);
  if (!got || rc != 0) return "probe failed: " + cmd;
  std::string s(line);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

std::string ExpectedCoretype() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

// The kernel's transparent-huge-page mode: "always", "madvise" or "never" (the bracketed
// word of /sys/kernel/mm/transparent_hugepage/enabled), "" when the file is absent.
std::string ThpMode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(in, line);
  const size_t open = line.find('['), close = line.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return line.substr(open + 1, close - open - 1);
}

TEST(ProcessEnvTest, PresetValuesAreKept) {
  EXPECT_EQ(Probe("OPENBLAS_CORETYPE=Prescott OMP_WAIT_POLICY=active "
                  "GLIBC_TUNABLES=glibc.malloc.hugetlb=0"),
            "Prescott|active|glibc.malloc.hugetlb=0");
  EXPECT_EQ(Probe("OPENBLAS_CORETYPE=Haswell"), "Haswell|passive|glibc.malloc.hugetlb=1");
}

TEST(ProcessEnvTest, UnsetValuesAreChosenForThisCpu) {
  EXPECT_EQ(Probe(""), ExpectedCoretype() + "|passive|glibc.malloc.hugetlb=1");
}

TEST(ProcessEnvTest, TheHugePageTunableJoinsTheUsersOthers) {
  EXPECT_EQ(Probe("OMP_WAIT_POLICY=active GLIBC_TUNABLES=glibc.malloc.arena_max=2"),
            ExpectedCoretype() + "|active|glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1");
}

TEST(ProcessEnvTest, AutotuneOffLeavesTheEnvironmentAlone) {
  EXPECT_EQ(Probe("XHC_BLAS_AUTOTUNE=0"), "||");
}

// The probe's 64 MiB heap block (after KeepFreedMemoryInProcess, as the binaries run) lies in
// a mapping the kernel may back with huge pages ("THPeligible: 1" in /proc/self/smaps): under
// `madvise` only with the tunable, which the contrast with XHC_BLAS_AUTOTUNE=0 shows.
TEST(ProcessEnvTest, LargeHeapBlocksMayTakeHugePages) {
  const std::string mode = ThpMode();
  if (mode != "madvise" && mode != "always") {
    GTEST_SKIP() << "transparent huge pages are '" << mode << "' on this kernel: nothing to check";
  }
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer's allocator replaces glibc's malloc, which is what reads the tunable.
  GTEST_SKIP() << "built with a sanitizer: its allocator, not glibc's malloc, serves the heap";
#endif
  EXPECT_EQ(Probe("", "thp"), "1");
  if (mode == "madvise") {
    EXPECT_EQ(Probe("XHC_BLAS_AUTOTUNE=0", "thp"), "0");
  } else {
    GTEST_LOG_(INFO) << "THP mode 'always': every mapping is eligible, no contrast to check";
  }
}

// THPeligible of the /proc/self/smaps mapping holding `p`, or "none".
std::string ThpEligibleAt(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t lo = 0, hi = 0;
    if (sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(':') > line.find('-')) {
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("THPeligible:", 0) == 0) {
      std::istringstream value(line.substr(12));
      std::string v;
      value >> v;
      return v;
    }
  }
  return "none";
}

}  // namespace
}  // namespace xhc

int main(int argc, char** argv) {
  if (const char* mode = getenv("XHC_ENV_PROBE"); mode != nullptr) {
    xhc::MaybeReexecWithTunedEnv(argv);
    if (std::string(mode) == "thp") {
      xhc::KeepFreedMemoryInProcess();
      std::vector<float> block(16u << 20, 1.0f);  // 64 MiB, touched
      printf("%s\n", xhc::ThpEligibleAt(block.data() + block.size() / 2).c_str());
      return 0;
    }
    const char* coretype = getenv("OPENBLAS_CORETYPE");
    const char* wait = getenv("OMP_WAIT_POLICY");
    const char* tunables = getenv("GLIBC_TUNABLES");
    printf("%s|%s|%s\n", coretype ? coretype : "", wait ? wait : "", tunables ? tunables : "");
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
