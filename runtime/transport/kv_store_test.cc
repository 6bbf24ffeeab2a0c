#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/transport/file_kv_store.h"
#include "runtime/transport/memory_kv_store.h"

namespace xhc {
namespace {

class KvStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<KvStore> MakeStore() {
    if (GetParam() == "memory") return std::make_unique<MemoryKvStore>();
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/kv-XXXXXX");
    EXPECT_NE(::mkdtemp(dir.data()), nullptr);
    return std::make_unique<FileKvStore>(dir);
  }
};

TEST_P(KvStoreTest, SetThenGetReturnsValuesInKeyOrder) {
  std::unique_ptr<KvStore> store = MakeStore();
  const std::string binary("a\0b/\xff", 5);
  ASSERT_TRUE(store->Set("job/rank 1", binary).ok());
  ASSERT_TRUE(store->Set("job/rank_0", "x").ok());
  ASSERT_TRUE(store->Set("job/rank_0", "y").ok());  // replaces
  absl::StatusOr<std::vector<std::string>> values =
      store->Get({"job/rank_0", "job/rank 1"}, absl::Seconds(1));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(*values, (std::vector<std::string>{"y", binary}));
  EXPECT_EQ(store->Set("", "v").code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(KvStoreTest, GetBlocksUntilAnotherThreadSets) {
  std::unique_ptr<KvStore> store = MakeStore();
  std::thread writer([&] {
    absl::SleepFor(absl::Milliseconds(50));
    EXPECT_TRUE(store->Set("late", "value").ok());
  });
  absl::StatusOr<std::vector<std::string>> values = store->Get({"late"}, absl::Seconds(10));
  writer.join();
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->front(), "value");
}

TEST_P(KvStoreTest, GetTimesOutNamingOnlyTheMissingKeys) {
  std::unique_ptr<KvStore> store = MakeStore();
  ASSERT_TRUE(store->Set("present", "1").ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> values =
      store->Get({"present", "absent"}, absl::Milliseconds(100));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(absl::StrContains(values.status().message(), "[absent]")) << values.status();
}

INSTANTIATE_TEST_SUITE_P(Stores, KvStoreTest, ::testing::Values("memory", "file"),
                         [](const auto& info) { return info.param; });

TEST(FileKvStoreTest, MissingDirectoryFailsSetLoudly) {
  FileKvStore store("/nonexistent/xhc-kv");
  absl::Status status = store.Set("k", "v");
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.message(), "/nonexistent/xhc-kv")) << status;
}

}  // namespace
}  // namespace xhc
