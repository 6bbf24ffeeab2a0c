#include "runtime/train/trainer.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/fault_file_system.h"

namespace xhc::train {
namespace fs = std::filesystem;
namespace {

std::string TempPath(const std::string& name) {
  return (fs::path(::testing::TempDir()) / name).string();
}

Config TinyConfig(const std::string& type) {
  const std::string corpus = TempPath("tiny_corpus.txt");
  std::ofstream out(corpus);
  for (int i = 0; i < 400; ++i) out << "to be or not to be, that is the question " << i << ".\n";
  out.close();
  const std::string yaml = absl::StrCat(
      "model: {d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 12,\n"
      "        residual: {type: ",
      type, ", n_streams: ", type == "vanilla" ? 1 : 6,
      ", n_active: 3, n_fixed: 1, conv_kernels: [2, 3], sinkhorn_iters: 5}}\n"
      "optim: {lr: 0.01, warmup_steps: 2}\n"
      "train: {steps: 6, batch_size: 2, microbatches: 2, seed: 5, eval_every: 3, eval_batches: 2}\n"
      "data: {train: ",
      corpus,
      "}\n"
      "checkpoint: {every: 2, keep: 2}\n");
  absl::StatusOr<Config> c = ParseConfig(yaml);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::map<std::string, Tensor> FinalTensors(const std::string& run) {
  absl::StatusOr<LoadedCheckpoint> c = LoadNewestValid(run + "/checkpoints", nullptr);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? c->tensors : std::map<std::string, Tensor>{};
}

class Resume : public ::testing::TestWithParam<std::string> {};

TEST_P(Resume, InterruptedRunIsBitIdenticalToUninterrupted) {
  const Config config = TinyConfig(GetParam());
  const std::string straight = TempPath("straight_" + GetParam());
  const std::string split = TempPath("split_" + GetParam());
  fs::remove_all(straight);
  fs::remove_all(split);
  absl::StatusOr<TrainResult> a = RunTraining(config, {.out_dir = straight, .quiet = true});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->step_losses.size(), 6u);
  absl::StatusOr<TrainResult> b1 =
      RunTraining(config, {.out_dir = split, .quiet = true, .stop_after = 3});
  ASSERT_TRUE(b1.ok()) << b1.status();
  absl::StatusOr<TrainResult> b2 =
      RunTraining(config, {.out_dir = split, .resume = true, .quiet = true});
  ASSERT_TRUE(b2.ok()) << b2.status();
  EXPECT_EQ(b2->start_step, 3);
  ASSERT_EQ(b2->step_losses.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b2->step_losses[i], a->step_losses[3 + i]) << i;
  const auto ta = FinalTensors(straight), tb = FinalTensors(split);
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [name, t] : ta) {
    ASSERT_TRUE(tb.count(name)) << name;
    EXPECT_EQ(t.values, tb.at(name).values) << name << " differs after resume";
  }
  // Training does something: the loss moved and stays finite.
  EXPECT_NE(a->step_losses.front(), a->step_losses.back());
  for (double l : a->step_losses) EXPECT_TRUE(std::isfinite(l));
}

INSTANTIATE_TEST_SUITE_P(Residuals, Resume, ::testing::Values("vanilla", "mhc", "xhc"));

// `--steps 0` exports the seeded init: checkpoint 0 holds the weights step 1 starts from, so
// a run resumed from it is bit-identical to one that never stopped.
TEST(Training, ZeroStepsExportsTheSeededInitAsCheckpointZero) {
  const Config config = TinyConfig("xhc");
  const std::string init = TempPath("init0");
  const std::string straight = TempPath("init0_straight");
  fs::remove_all(init);
  fs::remove_all(straight);
  absl::StatusOr<TrainResult> zero =
      RunTraining(config, {.steps = 0, .out_dir = init, .quiet = true});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_TRUE(zero->step_losses.empty());
  absl::StatusOr<LoadedCheckpoint> c = LoadNewestValid(init + "/checkpoints", nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->manifest.step, 0);
  absl::StatusOr<TrainResult> a = RunTraining(config, {.out_dir = straight, .quiet = true});
  ASSERT_TRUE(a.ok()) << a.status();
  absl::StatusOr<TrainResult> b =
      RunTraining(config, {.out_dir = init, .resume = true, .quiet = true});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->start_step, 0);
  EXPECT_EQ(b->step_losses, a->step_losses);
}

TEST(Training, CorruptLatestFallsBackAndMissingCorpusIsNamed) {
  Config config = TinyConfig("xhc");
  const std::string run = TempPath("fallback");
  fs::remove_all(run);
  ASSERT_TRUE(RunTraining(config, {.steps = 4, .out_dir = run, .quiet = true}).ok());
  // Step 4 is LATEST; corrupt it: resume must fall back to step 2.
  const std::string shard = run + "/checkpoints/step-000004/model.safetensors";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x7f');
  }
  absl::StatusOr<TrainResult> r =
      RunTraining(config, {.steps = 4, .out_dir = run, .resume = true, .quiet = true});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->start_step, 2);
  config.data.train = {"/nonexistent/corpus-*.txt"};
  absl::StatusOr<TrainResult> bad = RunTraining(config, {.out_dir = run + "2", .quiet = true});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("/nonexistent/corpus-*.txt"),
            std::string::npos);
}

// The policy for a full disk (docs/checkpoints.md, "Disk full"): the run stops at the
// checkpoint that cannot be written, that step is not committed and leaves nothing behind,
// LATEST still names the previous checkpoint, and --resume once there is space ends
// bit-identical to a run that never hit the fault.
TEST(Training, DiskFullStopsAtTheCheckpointAndResumeLosesNothing) {
  const Config config = TinyConfig("xhc");
  const std::string straight = TempPath("disk_full_straight");
  const std::string run = TempPath("disk_full");
  fs::remove_all(straight);
  fs::remove_all(run);
  FaultFileSystem counter(DefaultFileSystem());
  ASSERT_TRUE(
      RunTraining(config, {.out_dir = straight, .quiet = true, .checkpoint_files = &counter}).ok());
  // The disk fills up at the first write of the step-4 checkpoint and stays full.
  int64_t first = -1;
  for (size_t n = 0; n < counter.points().size() && first < 0; ++n) {
    if (counter.points()[n].find("step-000004") != std::string::npos) first = n;
  }
  ASSERT_GT(first, 0);
  FaultFileSystem full(DefaultFileSystem());
  full.FailAt(first, /*sticky=*/true);
  absl::StatusOr<TrainResult> stopped =
      RunTraining(config, {.out_dir = run, .quiet = true, .checkpoint_files = &full});
  ASSERT_FALSE(stopped.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(stopped.status())) << stopped.status();
  const std::string message(stopped.status().message());
  EXPECT_NE(message.find("checkpoint step 4 not committed"), std::string::npos) << message;
  EXPECT_NE(message.find(run + "/checkpoints/step-000004"), std::string::npos) << message;
  EXPECT_NE(message.find("free on the filesystem holding"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(run + "/checkpoints/step-000004"));
  absl::StatusOr<std::string> latest = LatestStepDir(run + "/checkpoints");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(fs::path(*latest).filename(), "step-000002");
  for (const auto& e : fs::recursive_directory_iterator(run + "/checkpoints")) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
  absl::StatusOr<TrainResult> resumed =
      RunTraining(config, {.out_dir = run, .resume = true, .quiet = true});
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->start_step, 2);
  const std::map<std::string, Tensor> want = FinalTensors(straight), got = FinalTensors(run);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_EQ(got.at(name).values, t.values) << name;
}

}  // namespace
}  // namespace xhc::train
