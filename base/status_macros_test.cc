#include "base/status_macros.h"

#include "gtest/gtest.h"

namespace xhc {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::Status Quarter(int x, int* out) {
  ASSIGN_OR_RETURN(int half, Half(x));
  ASSIGN_OR_RETURN(*out, Half(half));
  return absl::OkStatus();
}

absl::Status Check(bool ok) {
  RETURN_IF_ERROR(ok ? absl::OkStatus() : absl::NotFoundError("nope"));
  return absl::OkStatus();
}

TEST(StatusMacros, PropagateAndAssign) {
  int out = -1;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(Quarter(6, &out).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Check(false).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Check(true).ok());
}

}  // namespace
}  // namespace xhc
