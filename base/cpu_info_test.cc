#include "base/cpu_info.h"

#include "gtest/gtest.h"

namespace xhc {
namespace {

TEST(CpuInfo, NamesTheFirstProcessorWithFamilyAndModel) {
  const std::string cpuinfo =
      "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
      "model name\t: AMD \"EPYC\" 9\\555\n\nprocessor\t: 1\nmodel name\t: other\n";
  EXPECT_EQ(CpuModelNameFrom(cpuinfo), "AMD EPYC 9555 (family 26 model 2)");
}

TEST(CpuInfo, UnknownWithoutAModelName) {
  EXPECT_EQ(CpuModelNameFrom(""), "unknown");
  EXPECT_EQ(CpuModelNameFrom("processor\t: 0\ncpu family\t: 6\n"), "unknown");
  EXPECT_EQ(CpuModelNameFrom("model name\t: Some CPU\n"), "Some CPU");
}

TEST(CpuInfo, ThisMachineHasANameWithoutQuotes) {
  const std::string name = CpuModelName();
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(name.find('"'), std::string::npos);
}

}  // namespace
}  // namespace xhc
