#include "base/self_exec.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace xhc {
namespace {

using Argv = std::vector<std::string>;

TEST(SelfCommand, IsProcSelfExeOutsideABundle) {
  unsetenv("XHC_BUNDLE");
  EXPECT_EQ(SelfCommand(), Argv{"/proc/self/exe"});
  setenv("XHC_BUNDLE", "", 1);
  EXPECT_EQ(SelfCommand(), Argv{"/proc/self/exe"});
}

TEST(SelfCommand, GoesThroughTheBundlesLoader) {
  setenv("XHC_BUNDLE", "/b", 1);
  unsetenv("XHC_BUNDLE_LIBRARY_PATH");
  EXPECT_EQ(SelfCommand(),
            (Argv{"/b/lib/ld-linux-x86-64.so.2", "--library-path", "/b/lib", "/b/bin/xhc"}));
  setenv("XHC_BUNDLE_LIBRARY_PATH", "/b/lib:/usr/local/cuda/lib64", 1);
  EXPECT_EQ(SelfCommand(), (Argv{"/b/lib/ld-linux-x86-64.so.2", "--library-path",
                                 "/b/lib:/usr/local/cuda/lib64", "/b/bin/xhc"}));
  unsetenv("XHC_BUNDLE");
  unsetenv("XHC_BUNDLE_LIBRARY_PATH");
}

}  // namespace
}  // namespace xhc
