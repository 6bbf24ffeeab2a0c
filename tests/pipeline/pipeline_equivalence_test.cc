// Pipeline results against single-process training, with real processes, real gRPC and real
// gloo on loopback: for every schedule and rank count, every step's micro-batch losses and
// the checkpointed parameters after step 1 and after the last step are bit-identical to
// `xhc train` (compared as byte fingerprints, so a NaN can never compare equal by accident),
// on the CPU path and on the host device's streams (--device host),
// for every residual type; likewise with uneven stages (pipeline.first_stage_layers /
// last_stage_layers), built-in and CSV schedules. Every launch also shows the topology it ran
// (topology_check.h): the workers that registered, each rank's stages, and each rank's F/I/W
// spans in order against the asked schedule's lists, built by the scheduler itself.
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/pipeline/topology_check.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

constexpr int kSteps = 20;

struct Case {
  std::string schedule;  // a built-in type, or a name for a hand-written CSV
  int ranks;
  int chunks = 1;
  // How the schedule arrives: "" built in (pipeline.schedule); kExported / kExportedLowered:
  // `xhc schedule --format torch-csv [--lowered]` of `schedule`, run with
  // `xhc launch --schedule-csv`; anything else is the text of a hand-written CSV, run through
  // the config key pipeline.schedule_csv.
  std::string csv = "";
  // When set, rank 0 must report holding exactly these stages ("0, 3"): the placement the
  // plan gave it, so a CSV that was silently replaced by a built-in type fails.
  std::string rank0_stages = "";
  // Uneven stages: extra pipeline keys ("first_stage_layers: 1, last_stage_layers: 3"), and
  // the layer counts rank 0 must report for its stages ("1"), so keys that were ignored fail.
  std::string stage_layers = "";
  std::string rank0_layers = "";
  // The workers' --device ("" = cpu): "host:SEED" runs the executor's stream path on the host
  // device, every stream operation delayed by a seeded random time.
  std::string device = "";
};

constexpr char kExported[] = "exported";
constexpr char kExportedLowered[] = "exported-lowered";

// Hand-written for this test (no built-in type makes it): 3 stages on 2 ranks, rank 0 holding
// the first and the last (the loss), rank 1 the middle; the last stage splits its backward
// into I and W, the others run full B's.
constexpr char kHandWrittenCsv[] =
    "0F0,0F1,2F0,2I0,0F2,2F1,2I1,2W0,0B0,0F3,2F2,2I2,2W1,0B1,0F4,2F3,2I3,2W2,0B2,0F5,2F4,"
    "2I4,2W3,0B3,0F6,2F5,2I5,2W4,0B4,0F7,2F6,2I6,2W5,0B5,2F7,2I7,2W6,0B6,2W7,0B7\n"
    "1F0,1F1,1B0,1F2,1B1,1F3,1B2,1F4,1B3,1F5,1B4,1F6,1B5,1F7,1B6,1B7\n";

struct Variant {
  std::string name;
  std::string residual;  // the YAML `residual:` mapping
  std::vector<Case> cases;
};

// Every schedule users can select, on 1, 2 and 4 ranks where it exists; the types PyTorch
// ships beyond the first six are a separate list so they can be run on their own
// (--gtest_filter='*torch*').
const std::vector<Case> kAllSchedules = {{"gpipe", 1},
                                         {"gpipe", 2},
                                         {"gpipe", 4},
                                         {"1f1b", 1},
                                         {"1f1b", 2},
                                         {"1f1b", 4},
                                         {"interleaved1f1b", 2, 2},
                                         {"zb1p", 2},
                                         {"zb1p", 4},
                                         {"dualpipe", 2},
                                         {"dualpipe", 4},
                                         {"dualpipev", 2},
                                         {"dualpipev", 4}};
// zbv: two chunks per rank in a V (8 stages on 4 ranks); the looped types: chunks r, r+R.
const std::vector<Case> kTorchSchedules = {
    {"zbv", 2, 1, "", "0, 3"},
    {"zbv", 4, 1, "", "0, 7"},
    {"interleaved_zb", 2, 2, "", "0, 2"},
    {"interleaved_zb", 4, 2, "", "0, 4"},
    {"looped_bfs", 2, 2, "", "0, 2"},
    {"looped_bfs", 4, 2, "", "0, 4"},
    {"zbv", 2, 1, kExported, "0, 3"},
    {"interleaved_zb", 2, 2, kExportedLowered, "0, 2"},
    {"hand_written_3_stages", 2, 1, kHandWrittenCsv, "0, 2"}};

// Uneven stages (n_layers 8): pinned ends, an end holding no layer, and a CSV schedule whose
// stages are pinned too.
const std::vector<Case> kUnevenSchedules = {
    {"1f1b", 4, 1, "", "0", "first_stage_layers: 1, last_stage_layers: 3", "1"},
    {"1f1b", 2, 1, "", "0", "first_stage_layers: 0", "0"},
    {"dualpipev", 2, 1, "", "0, 3", "first_stage_layers: 3, last_stage_layers: 0", "3, 0"},
    {"zbv", 2, 1, kExported, "0, 3", "first_stage_layers: 1, last_stage_layers: 1", "1, 1"}};
// xhc_flash window 4: pinned counts are whole layer pairs.
const std::vector<Case> kUnevenPairSchedules = {
    {"1f1b", 2, 1, "", "0", "first_stage_layers: 2", "2"},
    {"dualpipev", 2, 1, "", "0, 3", "first_stage_layers: 0", "0, 2"}};

std::string ConfigYaml(const Variant& v, const std::string& corpus) {
  return absl::StrCat(
      "model: {d_model: 16, n_layers: 8, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,\n"
      "        residual: ",
      v.residual,
      "}\n"
      "optim: {lr: 0.01, warmup_steps: 3}\n"
      "train: {steps: ",
      kSteps,
      ", batch_size: 2, microbatches: 8, seed: 11, eval_every: 0}\n"
      "data: {train: ",
      corpus,
      "}\n"
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

// Writes the case's config (run + ".yaml") and its CSV, if any; returns the extra launch
// arguments.
std::string LaunchArgs(const Variant& v, const Case& c, const std::string& corpus,
                       const std::string& run) {
  const std::string cfg = run + ".yaml", csv = run + ".csv";
  const std::string layers = c.stage_layers.empty() ? "" : ", " + c.stage_layers;
  if (c.csv.empty()) {
    WriteText(cfg, absl::StrCat(ConfigYaml(v, corpus), "pipeline: {schedule: ", c.schedule,
                                ", workers: ", c.ranks, ", chunks: ", c.chunks, layers, "}\n"));
    return "";
  }
  if (c.csv == kExported || c.csv == kExportedLowered) {
    const std::string log = run + ".export.log";
    EXPECT_EQ(RunCommand(absl::StrCat(XhcBinary(), " schedule --type ", c.schedule, " --ranks ",
                                      c.ranks, " --microbatches 8 --chunks ", c.chunks,
                                      " --format torch-csv --out ", csv,
                                      c.csv == kExportedLowered ? " --lowered" : ""),
                         log),
              0)
        << ReadText(log);
    WriteText(cfg,
              absl::StrCat(ConfigYaml(v, corpus), "pipeline: {workers: ", c.ranks, layers, "}\n"));
    return " --schedule-csv " + csv;
  }
  WriteText(csv, c.csv);
  WriteText(cfg, absl::StrCat(ConfigYaml(v, corpus), "pipeline: {workers: ", c.ranks,
                              ", schedule_csv: ", csv, layers, "}\n"));
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
  ASSERT_EQ(
      RunCommand(absl::StrCat(XhcBinary(), " train --config ", config, " --out ", single), log), 0)
      << ReadText(log);
  const std::vector<std::string> want = MicrobatchLosses(single);
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  const auto want1 = CheckpointTensors(single, 1), want_last = CheckpointTensors(single, kSteps);
  ASSERT_FALSE(want1.empty());
  ASSERT_FALSE(want_last.empty());
  ASSERT_FALSE(FirstDifference(want1, want_last).empty()) << "training did not move the weights";
  for (const Case& c : v.cases) {
    SCOPED_TRACE(absl::StrCat(v.name, " ", c.schedule, " on ", c.ranks, " ranks", " ", c.csv, " ",
                              c.stage_layers));
    const std::string run =
        absl::StrCat(dir, "/", c.schedule, "_", c.ranks, c.csv.empty() ? "" : "_csv",
                     c.stage_layers.empty() ? "" : "_uneven", c.device.empty() ? "" : "_device");
    const std::string cfg = absl::StrCat(run, ".yaml"), run_log = run + ".log";
    const std::string launch_args = LaunchArgs(v, c, corpus, run);
    ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", cfg, " --out ", run,
                                      launch_args, c.device.empty() ? "" : " --device " + c.device),
                         run_log),
              0)
        << ReadText(run_log);
    if (!c.rank0_stages.empty()) {
      std::string placed = absl::StrCat("[rank 0] registered: stages [", c.rank0_stages, "], ",
                                        c.csv.empty() ? c.schedule : "custom");
      if (!c.rank0_layers.empty()) absl::StrAppend(&placed, ", layers [", c.rank0_layers, "]");
      EXPECT_NE(ReadText(run_log).find(placed), std::string::npos) << "want '" << placed << "' in\n"
                                                                   << ReadText(run_log);
    }
    if (!c.device.empty()) {
      EXPECT_NE(ReadText(run_log).find(", device " + c.device), std::string::npos)
          << "the workers did not run on " << c.device;
    }
    Asked asked;
    asked.type = c.csv.empty() ? c.schedule : "";
    asked.ranks = c.ranks;
    asked.chunks = c.chunks;
    asked.config_path = cfg;
    asked.schedule_csv = launch_args.empty() ? "" : run + ".csv";
    asked.in_order = c.device.empty();
    ExpectTopology(asked, kSteps, ReadText(run_log), run);
    const std::vector<std::string> got = MicrobatchLosses(run);
    ASSERT_EQ(got.size(), want.size());
    // Gradients are summed over micro-batches in double (ParamSetT::AccumulateGrads), so every
    // step is bit-identical, DualPipe's mirrored halves included.
    for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got[s], want[s]) << "step " << s + 1;
    const std::string diff1 = FirstDifference(want1, CheckpointTensors(run, 1));
    const std::string diff_last = FirstDifference(want_last, CheckpointTensors(run, kSteps));
    EXPECT_EQ(diff1, "") << "parameters after step 1 differ";
    EXPECT_EQ(diff_last, "") << "parameters after step " << kSteps << " differ";
    std::printf("%s %s%s%s R=%d: losses %s, parameters after steps 1 and %d %s\n", v.name.c_str(),
                c.schedule.c_str(), c.csv.empty() ? "" : " (csv)",
                c.stage_layers.empty() ? "" : (" {" + c.stage_layers + "}").c_str(), c.ranks,
                got == want ? "bit-identical" : "DIFFER", kSteps,
                diff1.empty() && diff_last.empty() ? "bit-identical" : "DIFFER");
  }
}

// A CSV the validator rejects stops `xhc launch` before any worker starts, with the grid.
TEST(ScheduleCsv, DeadlockingCsvIsRefusedBeforeAnyWorkerStarts) {
  const std::string dir = FreshDir("csv_refused");
  const std::string corpus = dir + "/corpus.txt", csv = dir + "/deadlock.csv";
  WriteText(corpus, "Pipelines move state; bubbles.\n");
  // Rank 1 starts with micro-batch 1 while rank 0 waits for micro-batch 0's backward.
  WriteText(csv, "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n");
  const std::string cfg = dir + "/config.yaml", log = dir + "/log.txt";
  WriteText(cfg, absl::StrCat("model: {d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, "
                              "d_ff: 32, seq_len: 8, residual: {type: vanilla}}\n"
                              "train: {steps: 2, batch_size: 2, microbatches: 2}\n"
                              "data: {train: ",
                              corpus, "}\npipeline: {workers: 2}\n"));
  EXPECT_NE(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", cfg, " --out ", dir,
                                    "/run --schedule-csv ", csv),
                       log),
            0);
  const std::string out = ReadText(log);
  EXPECT_NE(out.find("pipeline.schedule_csv " + csv + ": deadlock"), std::string::npos) << out;
  EXPECT_NE(out.find(">>1F1<<"), std::string::npos) << out;
  EXPECT_EQ(out.find("registered"), std::string::npos) << out;
}

// New residual types run the schedules with distinct stage-boundary behaviour: 1F1B (plain
// stages), DualPipeV (two stages per rank, V-shaped) and ZB1P (split weight gradients).
const std::vector<Case> kCoreSchedules = {
    {"1f1b", 2}, {"1f1b", 4}, {"zb1p", 2}, {"dualpipev", 2}, {"dualpipev", 4}};
// The stream path (runtime/worker/stage_executor_device.cc) on the host device, in real worker
// processes over gloo: plain stages, DualPipeV's overlapped pairs on two compute streams, and
// split weight gradients.
const std::vector<Case> kDeviceSchedules = {{"1f1b", 2, 1, "", "", "", "", "host:3"},
                                            {"dualpipev", 2, 1, "", "", "", "", "host:5"},
                                            {"zb1p", 2, 1, "", "", "", "", "host"}};
// Window 4 keeps layer pairs in one stage: 8 layers give at most 4 stages.
const std::vector<Case> kPairSchedules = {{"1f1b", 2}, {"1f1b", 4}, {"zb1p", 2}, {"dualpipev", 2}};

INSTANTIATE_TEST_SUITE_P(
    Residuals, PipelineEquivalence,
    ::testing::Values(
        Variant{"xhc",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kAllSchedules},
        Variant{"mhc", "{type: mhc, n_streams: 6, sinkhorn_iters: 6}", kAllSchedules},
        Variant{"vanilla", "{type: vanilla}", kAllSchedules},
        Variant{"xhc_torch",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kTorchSchedules},
        Variant{"mhc_torch", "{type: mhc, n_streams: 6, sinkhorn_iters: 6}", kTorchSchedules},
        Variant{"vanilla_torch", "{type: vanilla}", kTorchSchedules},
        Variant{"hc", "{type: hc, n_streams: 4}", kCoreSchedules},
        Variant{"xhc_host_device",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kDeviceSchedules},
        Variant{"mhc_conv", "{type: mhc, n_streams: 4, conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kCoreSchedules},
        Variant{"xhc_flash2",
                "{type: xhc_flash, window: 2, n_streams: 6, n_active: 3, "
                "n_fixed: 1, conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kCoreSchedules},
        Variant{"xhc_flash4",
                "{type: xhc_flash, window: 4, n_streams: 6, n_active: 3, "
                "n_fixed: 1, conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kPairSchedules},
        Variant{"xhc_uneven",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kUnevenSchedules},
        Variant{"vanilla_uneven", "{type: vanilla}", kUnevenSchedules},
        Variant{"xhc_flash4_uneven",
                "{type: xhc_flash, window: 4, n_streams: 6, n_active: 3, "
                "n_fixed: 1, conv_kernels: [2, 3], sinkhorn_iters: 6}",
                kUnevenPairSchedules}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace xhc::testing
