// Every residual variant through the user-facing commands, as real processes: `xhc train`
// writes a checkpoint, `xhc eval --checkpoint` evaluates it and dumps the
// gradients as safetensors (residual maps by spec name), `xhc sample` generates text, and
// invalid variant settings are refused naming the key.
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

struct Variant {
  std::string name, residual;
};

std::string Yaml(const std::string& residual, const std::string& corpus) {
  return absl::StrCat(
      "model: {d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 16,\n"
      "        residual: ",
      residual,
      "}\n"
      "train: {steps: 3, batch_size: 2, microbatches: 2, seed: 5, eval_every: 0}\n"
      "data: {train: ",
      corpus,
      "}\n"
      "checkpoint: {every: 3}\n");
}

class CliVariants : public ::testing::TestWithParam<Variant> {};

TEST_P(CliVariants, TrainEvalDumpGradsAndSample) {
  const Variant& v = GetParam();
  const std::string dir = FreshDir("cli_" + v.name);
  std::string text;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&text, "A fortune a day, number ", i, ".\n");
  WriteText(dir + "/corpus.txt", text);
  WriteText(dir + "/config.yaml", Yaml(v.residual, dir + "/corpus.txt"));
  const std::string log = dir + "/log.txt", run = dir + "/run";
  ASSERT_EQ(
      RunCommand(absl::StrCat(XhcBinary(), " train --config ", dir, "/config.yaml --out ", run),
                 log),
      0)
      << ReadText(log);
  const std::string grads = dir + "/grads.safetensors";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " eval --checkpoint ", run, " --data ", dir,
                                    "/corpus.txt --batch 2 --seq-len 16 --dump-grads ", grads),
                       log),
            0)
      << ReadText(log);
  const std::string eval_out = ReadText(log);
  EXPECT_NE(eval_out.find("\"loss\""), std::string::npos) << eval_out;
  const std::string dumped = ReadText(grads);
  // The residual maps' gradients are there under their spec names.
  EXPECT_NE(dumped.find("layers.1.mlp_hc.pre.weight"), std::string::npos);
  EXPECT_NE(dumped.find("layers.0.attn_hc.post.weight"), std::string::npos);
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " sample --checkpoint ", run,
                                    " --prompt 'A fortune' --tokens 20 --seed 3"),
                       log),
            0)
      << ReadText(log);
  EXPECT_GE(ReadText(log).size(), 20u);
}

INSTANTIATE_TEST_SUITE_P(Residuals, CliVariants,
                         ::testing::Values(Variant{"hc", "{type: hc}"},
                                           Variant{"mhc_conv", "{type: mhc, conv_kernels: [2, 3]}"},
                                           Variant{"xhc_flash2",
                                                   "{type: xhc_flash, n_streams: 6, n_active: 3}"},
                                           Variant{"xhc_flash4",
                                                   "{type: xhc_flash, window: 4, n_streams: 6, "
                                                   "n_active: 3}"}),
                         [](const auto& info) { return info.param.name; });

TEST(CliVariants, InvalidVariantSettingsNameTheKey) {
  const std::string dir = FreshDir("cli_bad");
  WriteText(dir + "/corpus.txt", "just enough text to name a corpus\n");
  const std::string log = dir + "/log.txt";
  const std::pair<std::string, std::string> bad[] = {
      {"{type: xhc_flash, window: 3}", "model.residual.window"},
      {"{type: hc, conv_kernels: [4]}", "model.residual.conv_kernels"},
      {"{type: mhc, window: 2}", "model.residual.window"}};
  for (const auto& [residual, key] : bad) {
    WriteText(dir + "/bad.yaml", Yaml(residual, dir + "/corpus.txt"));
    EXPECT_NE(RunCommand(absl::StrCat(XhcBinary(), " train --config ", dir, "/bad.yaml --out ", dir,
                                      "/never"),
                         log),
              0)
        << residual;
    EXPECT_NE(ReadText(log).find(key), std::string::npos) << ReadText(log);
  }
  // Window 4 over 2 layers on 2 workers would cut a window: refused by the plan.
  WriteText(dir + "/cut.yaml",
            absl::StrCat(Yaml("{type: xhc_flash, window: 4}", dir + "/corpus.txt"),
                         "pipeline: {schedule: 1f1b, workers: 2}\n"));
  EXPECT_NE(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", dir, "/cut.yaml --out ", dir,
                                    "/never2"),
                       log),
            0);
  EXPECT_NE(ReadText(log).find("model.residual.window"), std::string::npos) << ReadText(log);
}

// Counts on the command line below their minimum are refused naming the flag, before anything
// runs or is written (`--steps -3` used to run the config's steps).
TEST(CliVariants, CountsBelowTheirMinimumAreRefusedNamingTheFlag) {
  const std::string dir = FreshDir("cli_counts");
  WriteText(dir + "/corpus.txt", "just enough text to name a corpus\n");
  WriteText(dir + "/config.yaml", Yaml("{type: vanilla}", dir + "/corpus.txt"));
  const std::string log = dir + "/log.txt", cfg = dir + "/config.yaml";
  const std::pair<std::string, std::string> bad[] = {
      {"train --steps -3", "--steps: must be at least 1 (got -3)"},
      {"train --steps 0", "--steps: must be at least 1 (got 0)"},
      {"launch --workers 0", "--workers: must be at least 1"},
      {"launch --data-parallel -1", "--data-parallel: must be at least 1"},
      {"launch --steps -5", "--steps: must be at least 1"}};
  for (const auto& [args, message] : bad) {
    const std::string out = dir + "/never";
    EXPECT_NE(
        RunCommand(absl::StrCat(XhcBinary(), " ", args, " --config ", cfg, " --out ", out), log), 0)
        << args;
    EXPECT_NE(ReadText(log).find(message), std::string::npos) << args << ":\n" << ReadText(log);
    EXPECT_FALSE(std::filesystem::exists(out)) << args << " wrote its run directory";
  }
  EXPECT_NE(
      RunCommand(absl::StrCat(XhcBinary(), " sample --checkpoint ", dir, " --prompt hi --tokens 0"),
                 log),
      0);
  EXPECT_NE(ReadText(log).find("--tokens: must be at least 1"), std::string::npos) << ReadText(log);
}

// `xhc schedule --config F` reports peak activation memory in bytes for F's model: each held
// (stage, micro-batch) keeps batch_size x seq_len tokens of the [N, C] float32 state, so
// xhc's 16 streams cost 16x vanilla's one.
TEST(CliVariants, ScheduleReportsActivationBytesForTheConfiguredModel) {
  const std::string dir = FreshDir("cli_schedule_bytes");
  const std::string log = dir + "/log.txt";
  for (const auto& [residual, streams] :
       {std::pair<std::string, int>{"{type: xhc, n_streams: 16}", 16}, {"{type: vanilla}", 1}}) {
    WriteText(dir + "/model.yaml", Yaml(residual, dir + "/corpus.txt"));
    const std::string out = dir + "/stats.txt";
    ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " schedule --config ", dir,
                                      "/model.yaml --type 1f1b --ranks 2 --microbatches 4 "
                                      "--out ",
                                      out),
                         log),
              0)
        << ReadText(log);
    const int64_t per = int64_t{2} * 16 * streams * 16 * 4;  // B·T·N·C·4
    const std::string want = absl::StrCat("peak activation memory per rank: ", 2 * per, " ", per,
                                          " bytes (2, 1 x ", per, " bytes");
    EXPECT_NE(ReadText(out).find(want), std::string::npos) << "want '" << want << "' in\n"
                                                           << ReadText(out);
  }
  EXPECT_EQ(RunCommand(absl::StrCat(XhcBinary(), " schedule --config ", dir,
                                    "/missing.yaml --type 1f1b --ranks 2 --microbatches 4"),
                       log),
            2);
  EXPECT_NE(ReadText(log).find("missing.yaml"), std::string::npos) << ReadText(log);
}

}  // namespace
}  // namespace xhc::testing
