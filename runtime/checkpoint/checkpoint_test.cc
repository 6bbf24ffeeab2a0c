#include "runtime/checkpoint/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/checkpoint/manifest_json.h"

namespace xhc {
namespace fs = std::filesystem;
namespace {

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = (fs::path(::testing::TempDir()) /
             ::testing::UnitTest::GetInstance()->current_test_info()->name())
                .string();
    fs::remove_all(root_);
    fs::create_directories(root_);
    for (int i = 0; i < 6; ++i) a_.push_back(0.5f * i - 1.0f);
  }

  // Writes a two-shard checkpoint for `step` and commits it.
  void WriteStep(int64_t step, int keep = 3) {
    const std::string dir = (fs::path(root_) / StepDirName(step)).string();
    b_ = static_cast<float>(step);
    Manifest m;
    m.step = step;
    m.config_yaml = "model: {}\n";
    m.sampler_step = step;
    m.rng = {{"seed", "7"}};
    auto s0 = WriteShard(dir, "chunk-0.safetensors", {{"layers.0.w", {2, 3}, a_.data()}});
    auto s1 = WriteShard(dir, "chunk-1.safetensors", {{"head_hc.alpha", {}, &b_}});
    ASSERT_TRUE(s0.ok() && s1.ok());
    m.shards = {*s0, *s1};
    ASSERT_TRUE(CommitCheckpoint(root_, m, keep).ok());
  }

  void CorruptByte(const std::string& path, size_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c;
    f.read(&c, 1);
    c ^= 0x5a;
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }

  std::string root_;
  std::vector<float> a_;
  float b_ = 0;
};

TEST_F(CheckpointTest, RoundTripByName) {
  WriteStep(10);
  absl::StatusOr<std::string> latest = LatestStepDir(root_);
  ASSERT_TRUE(latest.ok());
  absl::StatusOr<LoadedCheckpoint> c = LoadCheckpoint(*latest);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->manifest.step, 10);
  EXPECT_EQ(c->manifest.rng.at("seed"), "7");
  ASSERT_EQ(c->tensors.size(), 2u);
  EXPECT_EQ(c->tensors.at("layers.0.w").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c->tensors.at("layers.0.w").values, a_);
  EXPECT_TRUE(c->tensors.at("head_hc.alpha").shape.empty());
  EXPECT_EQ(c->tensors.at("head_hc.alpha").values[0], 10.0f);
}

TEST_F(CheckpointTest, FlippedByteIsDataLossNamingTheShard) {
  WriteStep(1);
  const std::string shard = root_ + "/step-000001/chunk-0.safetensors";
  CorruptByte(shard, fs::file_size(shard) - 3);
  absl::StatusOr<LoadedCheckpoint> c = LoadCheckpoint(root_ + "/step-000001");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(c.status().message()).find("chunk-0.safetensors"), std::string::npos);
  EXPECT_EQ(VerifyCheckpoint(root_ + "/step-000001").status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, TruncatedShardAndManifestAreRefused) {
  WriteStep(2);
  const std::string shard = root_ + "/step-000002/chunk-1.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 1);
  EXPECT_EQ(LoadCheckpoint(root_ + "/step-000002").status().code(), absl::StatusCode::kDataLoss);
  WriteStep(3);
  const std::string manifest = root_ + "/step-000003/MANIFEST.json";
  fs::resize_file(manifest, fs::file_size(manifest) / 2);
  EXPECT_EQ(LoadCheckpoint(root_ + "/step-000003").status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointTest, MissingTensorIsRefused) {
  WriteStep(4);
  // Rewrite shard 0 without its tensor and recommit a manifest whose checksum matches the
  // new file but which still lists the tensor: only the name check can catch it.
  const std::string dir = root_ + "/step-000004";
  absl::StatusOr<ShardRecord> empty = WriteShard(dir, "chunk-0.safetensors", {});
  ASSERT_TRUE(empty.ok());
  absl::StatusOr<LoadedCheckpoint> before = LoadCheckpoint(dir);
  EXPECT_EQ(before.status().code(), absl::StatusCode::kDataLoss);  // checksum changed
  Manifest m;
  m.step = 4;
  m.shards = {*empty};
  m.shards[0].tensors = {"layers.0.w"};
  ASSERT_TRUE(CommitCheckpoint(root_, m, 3).ok());
  absl::StatusOr<LoadedCheckpoint> c = LoadCheckpoint(dir);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(c.status().message()).find("layers.0.w"), std::string::npos);
}

TEST_F(CheckpointTest, FallsBackToPreviousCommitAndPrunes) {
  WriteStep(5);
  WriteStep(6);
  CorruptByte(root_ + "/step-000006/chunk-0.safetensors", 20);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> c = LoadNewestValid(root_, &warnings);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->manifest.step, 5);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("step-000006"), std::string::npos);
  // keep = 2: after two more commits only the two newest remain.
  WriteStep(7, 2);
  WriteStep(8, 2);
  std::vector<std::string> dirs = CommittedStepDirs(root_);
  ASSERT_EQ(dirs.size(), 2u);
  EXPECT_NE(dirs[0].find("step-000008"), std::string::npos);
}

TEST_F(CheckpointTest, UnfinishedStepIsNeverLoaded) {
  WriteStep(9);
  // Shards of step 10 written, manifest never committed (a worker died mid-checkpoint).
  ASSERT_TRUE(
      WriteShard(root_ + "/step-000010", "chunk-0.safetensors", {{"layers.0.w", {2, 3}, a_.data()}})
          .ok());
  absl::StatusOr<LoadedCheckpoint> c = LoadNewestValid(root_, nullptr);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->manifest.step, 9);
  EXPECT_EQ(CommittedStepDirs(root_).size(), 1u);
}

TEST(Safetensors, RejectsGarbageHeader) {
  std::string bytes(8, '\0');
  bytes[0] = 100;  // header longer than the file
  EXPECT_EQ(DecodeSafetensors(bytes, "x").status().code(), absl::StatusCode::kDataLoss);
  const float v[2] = {1, 2};
  std::string good = EncodeSafetensors({{"a", {2}, v}}, {});
  good.resize(good.size() - 4);  // truncated data
  EXPECT_EQ(DecodeSafetensors(good, "x").status().code(), absl::StatusCode::kDataLoss);
}

// Regression (latest_fuzzer, corpus crash-step-beyond-int64): std::stoll threw out_of_range
// on a LATEST naming a step beyond int64, an uncaught exception that ended the process.
TEST_F(CheckpointTest, LatestBeyondInt64IsNamedNotThrown) {
  WriteStep(1);
  std::ofstream(root_ + "/LATEST") << "step-" << std::string(90, '5') << "\n";
  absl::StatusOr<std::string> latest = LatestStepDir(root_);
  ASSERT_FALSE(latest.ok());
  EXPECT_TRUE(absl::IsDataLoss(latest.status())) << latest.status();
  EXPECT_NE(latest.status().message().find(root_ + "/LATEST: 'step-555"), std::string::npos)
      << latest.status();
  EXPECT_EQ(StepOfDirName("step-" + std::string(90, '5')), -1);
  EXPECT_EQ(StepOfDirName("step-9223372036854775807"), INT64_MAX);
  std::vector<std::string> warnings;
  absl::StatusOr<LoadedCheckpoint> loaded = LoadNewestValid(root_, &warnings);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->manifest.step, 1);
}

// A manifest from elsewhere must not send the loader outside the step directory, and its
// numbers must be possible; each refusal is kDataLoss naming the manifest and the field.
TEST_F(CheckpointTest, HostileManifestFieldsAreRefused) {
  const std::string good = R"({"format_version": 1, "step": 3, "config_yaml": "", "sampler":
      {"step": 3}, "rng": {}, "shards": [{"file": "FILE", "bytes": BYTES, "xxhash64": "HASH",
      "tensors": []}]})";
  auto make = [&](const std::string& file, const std::string& bytes, const std::string& hash) {
    return absl::StrReplaceAll(good, {{"FILE", file}, {"BYTES", bytes}, {"HASH", hash}});
  };
  ASSERT_TRUE(DecodeManifest(make("chunk-0.safetensors", "8", "0123456789abcdef"), "m").ok());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {make("../../../etc/passwd", "8", "0123456789abcdef"), "is not a plain file name"},
      {make("/etc/passwd", "8", "0123456789abcdef"), "is not a plain file name"},
      {make("..", "8", "0123456789abcdef"), "is not a plain file name"},
      {make("", "8", "0123456789abcdef"), "is not a plain file name"},
      {make("a.safetensors", "-1", "0123456789abcdef"), "bytes -1 is not an integer in [0, 2^63)"},
      // Regression (manifest_fuzzer, corpus crash-step-is-huge-float): get<int64_t>() of
      // 1.2e59 was an undefined float-to-integer conversion.
      {make("a.safetensors", "1.2e59", "0123456789abcdef"), "bytes 1.2e+59 is not an integer"},
      {make("a.safetensors", "18446744073709551615", "0123456789abcdef"), "is not an integer"},
      {absl::StrReplaceAll(make("a", "8", "0123456789abcdef"),
                           {{"\"step\": 3,", "\"step\": 1e30,"}}),
       "step 1e+30 is not an integer"},
      {make("a.safetensors", "8", "../x"), "is not 16 lowercase hex digits"},
      {absl::StrReplaceAll(make("a", "8", "0123456789abcdef"), {{"\"step\": 3,", "\"step\": -3,"}}),
       "step -3 is not an integer in [0, 2^63)"},
  };
  for (const auto& [text, why] : bad) {
    absl::StatusOr<Manifest> m = DecodeManifest(text, "dir/MANIFEST.json");
    ASSERT_FALSE(m.ok()) << text;
    EXPECT_TRUE(absl::IsDataLoss(m.status())) << m.status();
    EXPECT_NE(m.status().message().find("dir/MANIFEST.json: "), std::string::npos);
    EXPECT_NE(m.status().message().find(why), std::string::npos) << m.status();
  }
}

}  // namespace
}  // namespace xhc
