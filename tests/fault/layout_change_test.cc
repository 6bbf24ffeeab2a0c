// Checkpoints are found by name, so a job written by 4 workers under DualPipeV resumes on 2
// workers under 1F1B, or in single-process `xhc train`, and ends bit-identical to the
// uninterrupted run.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {
namespace fs = std::filesystem;

std::string Yaml(const std::string& corpus, const std::string& schedule, int workers) {
  return absl::StrCat(
      "model: {d_model: 16, n_layers: 8, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 16,\n"
      "        residual: {type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: [2]}}\n"
      "optim: {lr: 0.01, warmup_steps: 3}\n"
      "train: {steps: 20, batch_size: 2, microbatches: 8, seed: 9, eval_every: 0}\n"
      "data: {train: ", corpus, "}\n"
      "pipeline: {schedule: ", schedule, ", workers: ", workers, "}\n"
      "checkpoint: {every: 10, keep: 3}\n");
}

// Copies run `from` keeping only its step-10 checkpoint (as if it had stopped there).
std::string TruncatedCopy(const std::string& from, const std::string& to) {
  fs::remove_all(to);
  fs::copy(from, to, fs::copy_options::recursive);
  fs::remove_all(to + "/checkpoints/step-000020");
  WriteText(to + "/checkpoints/LATEST", "step-000010\n");
  fs::remove(to + "/metrics.jsonl");
  return to;
}

std::string Tensors(const std::string& run) { return CheckpointFingerprint(run, 20); }

TEST(LayoutChange, DualPipeVCheckpointResumesOn1F1BAndSingleProcess) {
  const std::string dir = FreshDir("layout");
  std::string text;
  for (int i = 0; i < 400; ++i) absl::StrAppend(&text, "layouts change, names stay ", i, ".\n");
  WriteText(dir + "/corpus.txt", text);
  WriteText(dir + "/v4.yaml", Yaml(dir + "/corpus.txt", "dualpipev", 4));
  WriteText(dir + "/f2.yaml", Yaml(dir + "/corpus.txt", "1f1b", 2));
  const std::string log = dir + "/log.txt", ref = dir + "/ref";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", dir, "/v4.yaml --out ", ref),
                       log), 0) << ReadText(log);
  const std::string want = Tensors(ref);
  ASSERT_FALSE(want.empty());
  // 4-rank DualPipeV step 10 → 2-rank 1F1B.
  const std::string a = TruncatedCopy(ref, dir + "/as_1f1b");
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --resume ", a, " --config ", dir,
                                    "/f2.yaml"), log), 0) << ReadText(log);
  EXPECT_NE(ReadText(log).find("continuing from " + a + "/checkpoints/step-000010"),
            std::string::npos);
  EXPECT_TRUE(Tensors(a) == want) << "1f1b resume differs";
  // 4-rank DualPipeV step 10 → single process.
  const std::string b = TruncatedCopy(ref, dir + "/as_single");
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " train --config ", dir, "/v4.yaml --resume --out ",
                                    b), log), 0) << ReadText(log);
  EXPECT_TRUE(Tensors(b) == want) << "single-process resume differs";
}

}  // namespace
}  // namespace xhc::testing
