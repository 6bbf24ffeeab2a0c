// Under XHC_STRICT=1 a would-be skip is a failure naming why (the other branch is GTEST_SKIP
// itself, which a test here would only add to CI's list of skips).
#include "base/strict_skip.h"

#include <cstdlib>

#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace {

void SkipForAMissingTool() { XHC_SKIP_OR_FAIL("no frobnicator (setup.sh installs it)"); }

TEST(StrictSkip, AWouldBeSkipFailsUnderXhcStrict) {
  setenv("XHC_STRICT", "1", 1);
  EXPECT_FATAL_FAILURE(SkipForAMissingTool(),
                       "XHC_STRICT=1 and this test would skip: no frobnicator");
  setenv("XHC_STRICT", "0", 1);
  EXPECT_FALSE(::xhc::testing::StrictTests());
}

}  // namespace
