#include "runtime/device/device_spec.h"

#include "gtest/gtest.h"

namespace xhc::device {
namespace {

TEST(DeviceSpec, CpuIsNoDevice) {
  absl::StatusOr<std::unique_ptr<Device>> d = MakeDevice("cpu");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d, nullptr);
}

TEST(DeviceSpec, HostWithAndWithoutDelays) {
  for (const char* spec : {"host", "host:7"}) {
    absl::StatusOr<std::unique_ptr<Device>> d = MakeDevice(spec);
    ASSERT_TRUE(d.ok()) << spec << ": " << d.status();
    ASSERT_NE(*d, nullptr);
    EXPECT_EQ((*d)->Name(), "host");
  }
}

TEST(DeviceSpec, CudaIsRefusedSayingWhy) {
  absl::Status s = CheckDeviceSpec("cuda:0");
  EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
  EXPECT_NE(s.message().find("no CUDA device yet"), std::string::npos) << s;
  EXPECT_FALSE(MakeDevice("cuda:0").ok());
}

TEST(DeviceSpec, MalformedNamesTheForms) {
  for (const char* spec : {"gpu", "cuda:", "cuda:-1", "cuda:x", "host:abc", ""}) {
    absl::Status s = CheckDeviceSpec(spec);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << spec << ": " << s;
  }
  EXPECT_NE(CheckDeviceSpec("gpu").message().find("cpu, host, host:SEED or cuda:N"),
            std::string::npos);
}

}  // namespace
}  // namespace xhc::device
