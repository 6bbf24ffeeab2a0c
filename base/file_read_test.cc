#include "base/file_read.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"

namespace xhc {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

TEST(FileReadTest, ReadsEveryByte) {
  const std::string path = TempPath("bytes");
  const std::string bytes("a\0b\nc\xff", 6);
  std::ofstream(path, std::ios::binary) << bytes;
  absl::StatusOr<std::string> read = ReadWholeFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, bytes);
}

TEST(FileReadTest, MissingFileIsNotFoundNamingThePath) {
  const std::string path = TempPath("absent");
  absl::StatusOr<std::string> read = ReadWholeFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
}

TEST(FileReadTest, ParseFileNamesThePathInAParseError) {
  const std::string path = TempPath("config.yaml");
  std::ofstream(path) << "steps: -1\n";
  auto parse = [](const std::string& text) -> absl::StatusOr<int> {
    if (text.find('-') != std::string::npos) return absl::InvalidArgumentError("steps: negative");
    return 1;
  };
  absl::StatusOr<int> parsed = ParseFile(path, parse);
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), path + ": steps: negative");
  std::ofstream(path) << "steps: 1\n";
  EXPECT_EQ(*ParseFile(path, parse), 1);
}

}  // namespace
}  // namespace xhc
