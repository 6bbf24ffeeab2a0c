// A full disk at every write and fsync point of a checkpoint (FaultFileSystem: ENOSPC at point
// n, once or from then on), for the write path the trainer and workers use: shards, then
// CommitCheckpoint. Each time: the step is not committed, LATEST still names the previous
// checkpoint and it loads bit for bit, nothing of the failed step (temporary files, its
// directory, LATEST.prev) is left, the error is kResourceExhausted naming the file and the free
// space, and once space is back the same step commits (the job can carry on).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/fault_file_system.h"
#include "runtime/checkpoint/file_io.h"

namespace xhc {
namespace fs = std::filesystem;
namespace {

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = (fs::path(::testing::TempDir()) /
             ::testing::UnitTest::GetInstance()->current_test_info()->name())
                .string();
    fs::remove_all(base_);
    fs::create_directories(base_);
  }

  std::vector<float> Values(int64_t step) const {
    std::vector<float> v(6);
    for (int i = 0; i < 6; ++i) v[i] = 0.25f * i + static_cast<float>(step);
    return v;
  }

  // What the trainer does per checkpoint: two shards, then the commit; a failed shard
  // abandons the step.
  absl::Status WriteStep(const std::string& root, int64_t step, FileSystem& files) {
    const std::string dir = (fs::path(root) / StepDirName(step)).string();
    const std::vector<float> a = Values(step);
    const float b = -static_cast<float>(step);
    Manifest m;
    m.step = step;
    m.config_yaml = "model: {}\n";
    m.sampler_step = step;
    for (auto [file, view] : {std::pair{"chunk-0.safetensors", TensorView{"w", {2, 3}, a.data()}},
                              std::pair{"chunk-1.safetensors", TensorView{"alpha", {}, &b}}}) {
      absl::StatusOr<ShardRecord> rec = WriteShard(dir, file, {view}, files);
      if (!rec.ok()) {
        EXPECT_TRUE(AbandonCheckpoint(root, step, files).ok());
        return rec.status();
      }
      m.shards.push_back(*rec);
    }
    return CommitCheckpoint(root, m, /*keep=*/3, files);
  }

  // Every path under root, relative.
  std::vector<std::string> Listing(const std::string& root) const {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      out.push_back(fs::relative(e.path(), root).string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string base_;
};

TEST_F(DiskFullTest, EveryWriteAndFsyncPointLosesNothing) {
  // A clean commit of step 2 after step 1, to count (and name) its fault points.
  FaultFileSystem counter(DefaultFileSystem());
  const std::string dry = base_ + "/dry";
  ASSERT_TRUE(WriteStep(dry, 1, DefaultFileSystem()).ok());
  ASSERT_TRUE(WriteStep(dry, 2, counter).ok());
  std::vector<std::string> points;
  for (const std::string& p : counter.points())
    points.push_back(absl::StrReplaceAll(p, {{dry, "ROOT"}}));
  for (const char* kind :
       {"mkdir ", "create ", "append ", "fsync ", "close ", "fsync-dir ", "link "}) {
    bool seen = false;
    for (const std::string& p : points) seen = seen || absl::StartsWith(p, kind);
    EXPECT_TRUE(seen) << "no '" << kind << "' point in a checkpoint write";
  }
  ASSERT_GE(points.size(), 20u);

  for (bool sticky : {false, true}) {
    for (size_t n = 0; n < points.size(); ++n) {
      SCOPED_TRACE(absl::StrCat(sticky ? "disk stays full from " : "ENOSPC once at ", "point ", n,
                                ": ", points[n]));
      const std::string root = absl::StrCat(base_, "/", sticky, "-", n);
      ASSERT_TRUE(WriteStep(root, 1, DefaultFileSystem()).ok());
      const std::vector<std::string> before = Listing(root);
      FaultFileSystem full(DefaultFileSystem());
      full.FailAt(static_cast<int64_t>(n), sticky);
      const absl::Status s = WriteStep(root, 2, full);
      ASSERT_GT(full.points().size(), n);
      ASSERT_EQ(absl::StrReplaceAll(full.points()[n], {{root, "ROOT"}}), points[n])
          << "the write path is not deterministic";
      ASSERT_FALSE(s.ok());
      EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "No space left on device")) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "free on the filesystem holding " + root)) << s;
      // Nothing of step 2 is left; step 1 is exactly as it was and still loads.
      EXPECT_EQ(Listing(root), before);
      absl::StatusOr<std::string> latest = LatestStepDir(root);
      ASSERT_TRUE(latest.ok()) << latest.status();
      EXPECT_EQ(fs::path(*latest).filename(), StepDirName(1));
      std::vector<std::string> warnings;
      absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestValid(root, &warnings);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      EXPECT_TRUE(warnings.empty());
      EXPECT_EQ(loaded->manifest.step, 1);
      EXPECT_EQ(loaded->tensors.at("w").values, Values(1));
      // Space is back: the same step commits and loads.
      ASSERT_TRUE(WriteStep(root, 2, DefaultFileSystem()).ok());
      loaded = LoadNewestValid(root, &warnings);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      EXPECT_EQ(loaded->manifest.step, 2);
      EXPECT_EQ(loaded->tensors.at("w").values, Values(2));
    }
  }
}

TEST_F(DiskFullTest, MessageNamesTheFileAndTheFreeSpace) {
  FaultFileSystem full(DefaultFileSystem());
  full.FailAt(0, /*sticky=*/true);
  const std::string path = base_ + "/model.safetensors";
  const absl::Status s = WriteFileAtomic(path, "bytes", full);
  ASSERT_TRUE(absl::IsResourceExhausted(s)) << s;
  // "create DIR/model.safetensors.tmp.PID: No space left on device; 12.3 MiB (N bytes) free
  // on the filesystem holding DIR": the number is statvfs's, of the real filesystem.
  EXPECT_TRUE(absl::StartsWith(s.message(), "create " + path + ".tmp.")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "bytes) free on the filesystem holding " + base_))
      << s;
  absl::StatusOr<uint64_t> free = DefaultFileSystem().FreeBytes(base_);
  ASSERT_TRUE(free.ok());
  EXPECT_GT(*free, 0u);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(base_));
}

TEST_F(DiskFullTest, AbandonNeverRemovesTheStepLatestNames) {
  ASSERT_TRUE(WriteStep(base_, 1, DefaultFileSystem()).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(AbandonCheckpoint(base_, 1)));
  EXPECT_TRUE(LoadCheckpoint((fs::path(base_) / StepDirName(1)).string()).ok());
}

}  // namespace
}  // namespace xhc
