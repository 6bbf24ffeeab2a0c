// MaybeReexecWithTunedEnv (process_env.h) in real processes: this binary re-runs itself with
// XHC_ENV_PROBE set, in an environment the test chooses, and the probe prints what it has
// after the call (re-exec included). Checks the README's promise: a preset OPENBLAS_CORETYPE
// or OMP_WAIT_POLICY is kept, unset ones are filled in for this CPU, and
// XHC_BLAS_AUTOTUNE=0 leaves the environment alone.

#include "base/process_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "gtest/gtest.h"

namespace xhc {
namespace {

std::string SelfPath() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Runs the probe under `env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY -u XHC_BLAS_AUTOTUNE
// <assignments>` and returns its one line "CORETYPE|WAIT_POLICY".
std::string Probe(const std::string& assignments) {
  const std::string cmd = "env -u OPENBLAS_CORETYPE -u OMP_WAIT_POLICY -u XHC_BLAS_AUTOTUNE " +
                          assignments + " XHC_ENV_PROBE=1 '" + SelfPath() + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "popen failed";
  char line[256] = {};
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

TEST(ProcessEnvTest, PresetValuesAreKept) {
  EXPECT_EQ(Probe("OPENBLAS_CORETYPE=Prescott OMP_WAIT_POLICY=active"), "Prescott|active");
  EXPECT_EQ(Probe("OPENBLAS_CORETYPE=Haswell"), "Haswell|passive");
}

TEST(ProcessEnvTest, UnsetValuesAreChosenForThisCpu) {
  EXPECT_EQ(Probe(""), ExpectedCoretype() + "|passive");
}

TEST(ProcessEnvTest, AutotuneOffLeavesTheEnvironmentAlone) {
  EXPECT_EQ(Probe("XHC_BLAS_AUTOTUNE=0"), "|");
}

}  // namespace
}  // namespace xhc

int main(int argc, char** argv) {
  if (getenv("XHC_ENV_PROBE") != nullptr) {
    xhc::MaybeReexecWithTunedEnv(argv);
    const char* coretype = getenv("OPENBLAS_CORETYPE");
    const char* wait = getenv("OMP_WAIT_POLICY");
    printf("%s|%s\n", coretype ? coretype : "", wait ? wait : "");
    return 0;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
