// Every op, optimized and reference, refuses a shape it cannot run with kInvalidArgument
// naming the op and the argument, before it touches a buffer (the buffers here are null, so
// an op that ran anyway would crash the test).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/nn/nn_ops.h"

namespace xhc::nn {
namespace {

void ExpectRefused(const absl::Status& s, const std::string& op, const std::string& what) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(std::string(s.message()).rfind(op + ": ", 0), 0u) << s;
  EXPECT_NE(s.message().find(what), std::string::npos) << s;
}

TEST(ShapeCheck, NegativeSizesAreRefusedByBothPaths) {
  float* f = nullptr;
  double* d = nullptr;
  ExpectRefused(MatmulForward(f, f, f, 4, -3, 2), "MatmulForward", "K = -3");
  ExpectRefused(MatmulForward(d, d, d, 4, -3, 2), "MatmulForward", "K = -3");
  ExpectRefused(MatmulBackwardInput(f, f, f, -1, 3, 2), "MatmulBackwardInput", "M = -1");
  ExpectRefused(MatmulBackwardWeight(d, d, d, 1, 3, -2), "MatmulBackwardWeight", "N = -2");
  ExpectRefused(RmsnormForward(f, f, f, f, 2, -8, 1e-6f), "RmsnormForward", "C = -8");
  ExpectRefused(RmsnormBackwardInput(d, d, d, d, d, -2, 8), "RmsnormBackwardInput", "R = -2");
  ExpectRefused(RmsnormBackwardWeight(f, f, f, f, -2, 8), "RmsnormBackwardWeight", "R = -2");
  ExpectRefused(SwigluForward(f, f, f, -5), "SwigluForward", "n = -5");
  ExpectRefused(SwigluBackward(d, d, d, d, d, -5), "SwigluBackward", "n = -5");
}

TEST(ShapeCheck, StructuralConstraints) {
  float* f = nullptr;
  double* d = nullptr;
  ExpectRefused(RopeForward(f, f, 1, 4, 2, 7, 10000.0f), "RopeForward", "dh = 7 is odd");
  ExpectRefused(RopeBackward(d, d, 1, 4, 2, 7, 10000.0), "RopeBackward", "dh = 7 is odd");
  ExpectRefused(AttentionForward(f, f, f, f, f, 1, 4, 6, 4, 8), "AttentionForward",
                "H = 6 is not a multiple of Hkv = 4");
  ExpectRefused(AttentionBackward(d, d, d, d, d, d, d, d, d, 1, 4, 4, 0, 8), "AttentionBackward",
                "Hkv = 0");
  const std::vector<int32_t> targets = {0, 5};
  float loss = 0;
  ExpectRefused(CrossEntropyForward(&loss, f, f, targets.data(), 2, 5), "CrossEntropyForward",
                "target 5 of row 1 is outside [0, 5)");
  ExpectRefused(CrossEntropyBackward(d, d, d, targets.data(), 2, 5, 1.0), "CrossEntropyBackward",
                "target 5 of row 1");
  ExpectRefused(AdamwStep(f, f, f, f, 16, 0, 1e-3f, true), "AdamwStep", "step = 0");
  ExpectRefused(ref::AdamwStep(d, d, d, d, 16L, 0L, 1e-3, 0.9, 0.95, 1e-8, 0.1, true, 1.0),
                "AdamwStep", "step = 0");
}

TEST(ShapeCheck, ZeroSizesAreValidAndDoNothing) {
  float* f = nullptr;
  EXPECT_TRUE(MatmulForward(f, f, f, 0, 3, 2).ok());
  EXPECT_TRUE(SwigluForward(f, f, f, 0).ok());
  float loss = -1;
  EXPECT_TRUE(CrossEntropyForward(&loss, f, f, nullptr, 0, 5).ok());
  EXPECT_EQ(loss, 0.0f);
}

}  // namespace
}  // namespace xhc::nn
