// `xhc launch --resume` runs the schedule the job started with when that came from
// `--schedule-csv` (outside config.yaml): the run directory keeps the CSV, so the resumed
// job is placed as the CSV says (rank 0 holds ZB-V's stages 0 and 3, where the config's
// default 1f1b would give it stage 0 alone) and ends bit-identical to the uninterrupted run,
// even after the original file is gone; a CSV named again whose bytes changed is refused
// before any worker starts.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {
namespace fs = std::filesystem;

constexpr char kZbvPlaced[] = "[rank 0] registered: stages [0, 3], custom";

TEST(ScheduleCsvResume, ResumeRunsTheSavedCsv) {
  const std::string dir = FreshDir("schedule_resume");
  std::string text;
  for (int i = 0; i < 300; ++i) absl::StrAppend(&text, "schedules come back ", i, ".\n");
  WriteText(dir + "/corpus.txt", text);
  const std::string cfg = dir + "/config.yaml", csv = dir + "/zbv.csv", log = dir + "/log.txt";
  WriteText(
      cfg,
      absl::StrCat(
          "model: {d_model: 16, n_layers: 4, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,\n"
          "        residual: {type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: "
          "[2]}}\n"
          "optim: {lr: 0.01, warmup_steps: 3}\n"
          "train: {steps: 20, batch_size: 2, microbatches: 4, seed: 3, eval_every: 0}\n"
          "data: {train: ",
          dir,
          "/corpus.txt}\n"
          "pipeline: {workers: 2}\n"
          "checkpoint: {every: 10, keep: 3}\n"));
  auto export_csv = [&](const std::string& type) {
    return RunCommand(absl::StrCat(XhcBinary(), " schedule --type ", type,
                                   " --ranks 2 --microbatches 4 --format torch-csv --out ", csv),
                      log);
  };
  ASSERT_EQ(export_csv("zbv"), 0) << ReadText(log);
  const std::string zbv = ReadText(csv);
  const std::string ref = dir + "/ref";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", cfg, " --out ", ref,
                                    " --schedule-csv ", csv),
                       log),
            0)
      << ReadText(log);
  ASSERT_NE(ReadText(log).find(kZbvPlaced), std::string::npos) << ReadText(log);
  EXPECT_EQ(ReadText(ref + "/schedule.csv"), zbv);
  const std::string want = CheckpointFingerprint(ref, 20);
  ASSERT_FALSE(want.empty());

  // Resumed from step 10 with neither --schedule-csv nor --config, the file gone.
  fs::remove(csv);
  const std::string a = CopyRunAsOfStep(ref, dir + "/resumed", 10);
  const std::string a_log = dir + "/resumed.log";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --resume ", a), a_log), 0)
      << ReadText(a_log);
  const std::string out = ReadText(a_log);
  EXPECT_NE(out.find("continuing from " + a + "/checkpoints/step-000010"), std::string::npos)
      << out;
  EXPECT_NE(out.find("running the schedule CSV saved in " + a + "/schedule.csv"), std::string::npos)
      << out;
  EXPECT_NE(out.find(kZbvPlaced), std::string::npos) << out;
  EXPECT_TRUE(CheckpointFingerprint(a, 20) == want) << "resumed run differs";

  // The same flag again, but the file now holds another schedule: refused before any worker
  // starts, naming both files.
  ASSERT_EQ(export_csv("1f1b"), 0) << ReadText(log);
  const std::string b = CopyRunAsOfStep(ref, dir + "/changed", 10);
  const std::string b_log = dir + "/changed.log";
  EXPECT_NE(
      RunCommand(absl::StrCat(XhcBinary(), " launch --resume ", b, " --schedule-csv ", csv), b_log),
      0);
  const std::string refused = ReadText(b_log);
  EXPECT_NE(refused.find("resume: the schedule CSV " + csv), std::string::npos) << refused;
  EXPECT_NE(refused.find("differs from the one this job ran, saved as " + b + "/schedule.csv"),
            std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("registered"), std::string::npos) << refused;
}

}  // namespace
}  // namespace xhc::testing
