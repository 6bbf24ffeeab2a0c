// Pipeline results against single-process training, with real processes, real gRPC and real
// gloo on loopback: for every schedule and rank count, every step's micro-batch losses and
// the checkpointed parameters after step 1 and after the last step are bit-identical to
// `xhc train` (compared as byte fingerprints, so a NaN can never compare equal by accident),
// for every residual type.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

constexpr int kSteps = 20;

struct Case {
  std::string schedule;
  int ranks;
  int chunks = 1;
};

struct Variant {
  std::string name;
  std::string residual;  // the YAML `residual:` mapping
  std::vector<Case> cases;
};

// Every schedule users can select, on 1, 2 and 4 ranks where it exists.
const std::vector<Case> kAllSchedules = {
    {"gpipe", 1},     {"gpipe", 2},       {"gpipe", 4},         {"1f1b", 1},
    {"1f1b", 2},      {"1f1b", 4},        {"interleaved1f1b", 2, 2},
    {"zb1p", 2},      {"zb1p", 4},        {"dualpipe", 2},      {"dualpipe", 4},
    {"dualpipev", 2}, {"dualpipev", 4}};

std::string ConfigYaml(const Variant& v, const std::string& corpus) {
  return absl::StrCat(
      "model: {d_model: 16, n_layers: 8, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,\n"
      "        residual: ", v.residual, "}\n"
      "optim: {lr: 0.01, warmup_steps: 3}\n"
      "train: {steps: ", kSteps, ", batch_size: 2, microbatches: 8, seed: 11, eval_every: 0}\n"
      "data: {train: ", corpus, "}\n"
      "checkpoint: {every: 1, keep: 100}\n");
}

// The first tensor whose bytes differ between two checkpoints ("" when none does).
std::string FirstDifference(const std::map<std::string, Tensor>& want,
                            const std::map<std::string, Tensor>& got) {
  if (want.size() != got.size()) return absl::StrCat(got.size(), " tensors, want ", want.size());
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    if (it == got.end()) return name + " missing";
    if (it->second.values.size() != t.values.size() ||
        std::memcmp(it->second.values.data(), t.values.data(), sizeof(float) * t.values.size())) {
      return absl::StrCat(name, " (max rel diff ", RelativeDiff(t, it->second), ")");
    }
  }
  return "";
}

class PipelineEquivalence : public ::testing::TestWithParam<Variant> {};

TEST_P(PipelineEquivalence, MatchesSingleProcessBitForBit) {
  const Variant& v = GetParam();
  const std::string dir = FreshDir("equiv_" + v.name);
  const std::string corpus = dir + "/corpus.txt";
  std::string text;
  for (int i = 0; i < 300; ++i) absl::StrAppend(&text, "Pipelines move state; ", i, " bubbles.\n");
  WriteText(corpus, text);
  const std::string config = dir + "/config.yaml";
  WriteText(config, ConfigYaml(v, corpus));
  const std::string log = dir + "/log.txt";
  const std::string single = dir + "/single";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " train --config ", config, " --out ", single),
                       log), 0) << ReadText(log);
  const std::vector<std::string> want = MicrobatchLosses(single);
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  const auto want1 = CheckpointTensors(single, 1), want_last = CheckpointTensors(single, kSteps);
  ASSERT_FALSE(want1.empty());
  ASSERT_FALSE(want_last.empty());
  ASSERT_FALSE(FirstDifference(want1, want_last).empty()) << "training did not move the weights";
  for (const Case& c : v.cases) {
    SCOPED_TRACE(absl::StrCat(v.name, " ", c.schedule, " on ", c.ranks, " ranks"));
    const std::string run = absl::StrCat(dir, "/", c.schedule, "_", c.ranks);
    const std::string cfg = absl::StrCat(run, ".yaml");
    WriteText(cfg, absl::StrCat(ConfigYaml(v, corpus), "pipeline: {schedule: ", c.schedule,
                                ", workers: ", c.ranks, ", chunks: ", c.chunks, "}\n"));
    ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", cfg, " --out ", run), log),
              0) << ReadText(log);
    const std::vector<std::string> got = MicrobatchLosses(run);
    ASSERT_EQ(got.size(), want.size());
    // Gradients are summed over micro-batches in double (ParamSetT::AccumulateGrads), so every
    // step is bit-identical, DualPipe's mirrored halves included.
    for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got[s], want[s]) << "step " << s + 1;
    const std::string diff1 = FirstDifference(want1, CheckpointTensors(run, 1));
    const std::string diff_last = FirstDifference(want_last, CheckpointTensors(run, kSteps));
    EXPECT_EQ(diff1, "") << "parameters after step 1 differ";
    EXPECT_EQ(diff_last, "") << "parameters after step " << kSteps << " differ";
    std::printf("%s %s R=%d: losses %s, parameters after steps 1 and %d %s\n", v.name.c_str(),
                c.schedule.c_str(), c.ranks, got == want ? "bit-identical" : "DIFFER", kSteps,
                diff1.empty() && diff_last.empty() ? "bit-identical" : "DIFFER");
  }
}

// New residual types run the schedules with distinct stage-boundary behaviour: 1F1B (plain
// stages), DualPipeV (two stages per rank, V-shaped) and ZB1P (split weight gradients).
const std::vector<Case> kCoreSchedules = {
    {"1f1b", 2}, {"1f1b", 4}, {"zb1p", 2}, {"dualpipev", 2}, {"dualpipev", 4}};
// Window 4 keeps layer pairs in one stage: 8 layers give at most 4 stages.
const std::vector<Case> kPairSchedules = {{"1f1b", 2}, {"1f1b", 4}, {"zb1p", 2}, {"dualpipev", 2}};

INSTANTIATE_TEST_SUITE_P(
    Residuals, PipelineEquivalence,
    ::testing::Values(
        Variant{"xhc", "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                       "conv_kernels: [2, 3], sinkhorn_iters: 6}", kAllSchedules},
        Variant{"mhc", "{type: mhc, n_streams: 6, sinkhorn_iters: 6}", kAllSchedules},
        Variant{"vanilla", "{type: vanilla}", kAllSchedules},
        Variant{"hc", "{type: hc, n_streams: 4}", kCoreSchedules},
        Variant{"mhc_conv", "{type: mhc, n_streams: 4, conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kCoreSchedules},
        Variant{"xhc_flash2", "{type: xhc_flash, window: 2, n_streams: 6, n_active: 3, "
                              "n_fixed: 1, conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kCoreSchedules},
        Variant{"xhc_flash4", "{type: xhc_flash, window: 4, n_streams: 6, n_active: 3, "
                              "n_fixed: 1, conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kPairSchedules}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace xhc::testing
