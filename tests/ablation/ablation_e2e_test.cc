// `xhc ablate` end to end with real processes: 2 variants × 1 seed × a few steps. The study
// is killed (SIGKILL) once its first run has a result, restarted on the same directory, and
// must skip that run (its result file untouched), finish the other, and write a report whose
// tables, diagnostics and findings are all there; `xhc eval --diagnostics` on a vanilla
// checkpoint gives gain 1 exactly.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

namespace fs = std::filesystem;

std::string AblationYaml(const std::string& corpus) {
  // mhc4 is the costlier run, so it runs first (parallel_runs 1); vanilla second.
  return absl::StrCat(
      "ablation: {variants: [vanilla, mhc4], seeds: [3], steps: 40, eval_every: 10,\n"
      "           parallel_runs: 1, threads_per_run: 1, run_timeout_s: 60, diagnostics_batch: 2}\n"
      "job:\n"
      "  model: {d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 16}\n"
      "  optim: {lr: 0.01, warmup_steps: 2}\n"
      "  train: {batch_size: 2, microbatches: 1, eval_batches: 2}\n"
      "  data: {train: ",
      corpus, "}\n");
}

TEST(AblationE2E, KilledStudyResumesAndReports) {
  const std::string dir = FreshDir("ablation");
  std::string text;
  for (int i = 0; i < 5000; ++i) absl::StrAppend(&text, "Streams mix and stay bounded ", i, ".\n");
  WriteText(dir + "/corpus.txt", text);
  WriteText(dir + "/ablation.yaml", AblationYaml(dir + "/corpus.txt"));
  const std::string out = dir + "/out", log = dir + "/log.txt";
  const std::string cmd =
      absl::StrCat(XhcBinary(), " ablate --config ", dir, "/ablation.yaml --out ", out);
  const int pid = StartBackground(cmd, log);
  ASSERT_GT(pid, 0);
  const std::string first = out + "/results/mhc4-s3.json";
  // The partial report is written right after the first run's result file.
  ASSERT_TRUE(WaitForText(out + "/report.md", "Partial report: 1 run(s) not finished yet", 40))
      << ReadText(log);
  ASSERT_TRUE(fs::exists(first)) << ReadText(log);
  kill(pid, SIGKILL);  // mid-study: the vanilla run is starting or training
  WaitForExit(pid, 10);
  const std::string kept = ReadText(first);
  const auto kept_time = fs::last_write_time(first);

  ASSERT_EQ(RunCommand(cmd, log), 0) << ReadText(log);
  const std::string progress = ReadText(log);
  EXPECT_NE(progress.find("1 already done"), std::string::npos) << progress;
  EXPECT_NE(progress.find("vanilla-s3: val loss"), std::string::npos) << progress;
  EXPECT_EQ(ReadText(first), kept);
  EXPECT_EQ(fs::last_write_time(first), kept_time);  // not rewritten: the run was skipped

  const std::string md = ReadText(out + "/report.md");
  for (const char* want :
       {"| variant | seeds ok | equal steps | equal FLOPs | equal wall-clock |",
        "| vanilla | 1/1 |", "| mhc4 | 1/1 |",
        "| vanilla | 1.0000 | 1.0000 | 1.0000 | 1.0000 | 1.0000 |",  // gain 1, self-share 1
        "**Does xhc ≤ mhc < vanilla hold here?**", "**What does each variant cost in wall-clock?**",
        "mhc4 ", "× the FLOPs", "Each variant ran one seed", "## FLOP count"}) {
    EXPECT_NE(md.find(want), std::string::npos) << want << "\n" << md;
  }
  EXPECT_EQ(md.find("## Failed runs"), std::string::npos) << md;
  EXPECT_EQ(md.find("Partial report"), std::string::npos) << md;
  for (const char* chart : {"curves_steps", "curves_flops", "curves_seconds"}) {
    EXPECT_GT(fs::file_size(absl::StrCat(out, "/charts/", chart, ".png")), 1000u) << chart;
  }
  const nlohmann::json result = nlohmann::json::parse(ReadText(out + "/results/vanilla-s3.json"));
  EXPECT_TRUE(result["ok"].get<bool>());
  EXPECT_EQ(result["curve"].size(), 4u);                 // steps 10, 20, 30, 40
  EXPECT_EQ(result["diagnostics"]["depth"].size(), 4u);  // 2 layers × 2 sublayers

  // The eval command by itself, on the vanilla run's checkpoint.
  const std::string eval = absl::StrCat(
      XhcBinary(), " eval --checkpoint ", out, "/runs/vanilla-s3/run --data ", dir,
      "/corpus.txt --batch 2 --seq-len 16 --diagnostics --diagnostics-out ", dir, "/diag.json");
  ASSERT_EQ(RunCommand(eval, dir + "/eval.log"), 0) << ReadText(dir + "/eval.log");
  const nlohmann::json d = nlohmann::json::parse(ReadText(dir + "/diag.json"));
  EXPECT_EQ(d["depth"].back()["forward_max"].get<double>(), 1.0);
  EXPECT_EQ(d["depth"].back()["backward_max"].get<double>(), 1.0);
  EXPECT_NE(ReadText(dir + "/eval.log").find("\"diagnostics\": {"), std::string::npos);
}

}  // namespace
}  // namespace xhc::testing
