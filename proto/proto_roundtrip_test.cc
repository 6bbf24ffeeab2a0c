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
  report.set_generation(2);
  proto::StepResult* step = report.mutable_step_result();
  step->set_step(17);
  step->add_losses(2.5);
  step->add_losses(1.25);
  std::string wire;
  ASSERT_TRUE(report.SerializeToString(&wire));
  proto::StepReport back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.rank(), 3);
  EXPECT_EQ(back.generation(), 2);
  ASSERT_EQ(back.kind_case(), proto::StepReport::kStepResult);
  EXPECT_EQ(back.step_result().step(), 17);
  ASSERT_EQ(back.step_result().losses_size(), 2);
  EXPECT_EQ(back.step_result().losses(1), 1.25);
  // One kind per report: setting another replaces it.
  back.mutable_ready();
  EXPECT_EQ(back.kind_case(), proto::StepReport::kReady);
  EXPECT_FALSE(back.has_step_result());
  // The service descriptor is generated too.
  EXPECT_STREQ(proto::Controller::service_full_name(), "xhc.proto.Controller");
}

}  // namespace
}  // namespace xhc
