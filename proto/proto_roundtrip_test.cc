#include <string>

#include "gtest/gtest.h"
#include "proto/xhc.grpc.pb.h"
#include "proto/xhc.pb.h"

namespace xhc {
namespace {

// Proves the generated code compiles, links against the system protobuf/gRPC and
// serializes: a report survives a wire round trip field for field.
TEST(Proto, StepReportRoundTrip) {
  proto::StepReport report;
  report.set_rank(3);
  report.set_step(17);
  report.add_losses(2.5);
  report.add_losses(1.25);
  std::string wire;
  ASSERT_TRUE(report.SerializeToString(&wire));
  proto::StepReport back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.rank(), 3);
  EXPECT_EQ(back.step(), 17);
  ASSERT_EQ(back.losses_size(), 2);
  EXPECT_EQ(back.losses(1), 1.25);
  // The service descriptor is generated too.
  EXPECT_STREQ(proto::Controller::service_full_name(), "xhc.proto.Controller");
}

}  // namespace
}  // namespace xhc
