// Checkpoints are found by name, so a job written by 4 workers under DualPipeV resumes on 2
// workers under 1F1B, or in single-process `xhc train`, and ends bit-identical to the
// uninterrupted run; likewise for hc and for xhc_flash with window 4 (whose stages hold layer
// pairs: DualPipeV on 2 workers resumed on 1F1B with 4), and for uneven stages
// (pipeline.first_stage_layers / last_stage_layers) resumed on the even split and back, and
// across devices: a job whose workers ran on the host device's streams (--device host, the
// stand-in for a GPU: float32 on disk whatever the device) resumed on the CPU path, and back.
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

struct Layouts {
  std::string name, residual;
  std::string from_schedule;
  int from_workers;
  std::string to_schedule;
  int to_workers;
  std::string from_layers = "", to_layers = "";  // extra pipeline keys: uneven stages
  std::string from_device = "", to_device = "";  // the workers' --device ("" = cpu)
};

std::string DeviceFlag(const std::string& device) {
  return device.empty() ? "" : " --device " + device;
}

std::string Yaml(const std::string& corpus, const std::string& residual,
                 const std::string& schedule, int workers, const std::string& layers) {
  return absl::StrCat(
      "model: {d_model: 16, n_layers: 8, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 16,\n"
      "        residual: ",
      residual,
      "}\n"
      "optim: {lr: 0.01, warmup_steps: 3}\n"
      "train: {steps: 20, batch_size: 2, microbatches: 8, seed: 9, eval_every: 0}\n"
      "data: {train: ",
      corpus,
      "}\n"
      "pipeline: {schedule: ",
      schedule, ", workers: ", workers, layers.empty() ? "" : ", ", layers,
      "}\n"
      "checkpoint: {every: 10, keep: 3}\n");
}

std::string Tensors(const std::string& run) { return CheckpointFingerprint(run, 20); }

class LayoutChange : public ::testing::TestWithParam<Layouts> {};

TEST_P(LayoutChange, CheckpointResumesOnAnotherLayoutAndSingleProcess) {
  const Layouts& p = GetParam();
  const std::string dir = FreshDir("layout_" + p.name);
  std::string text;
  for (int i = 0; i < 400; ++i) absl::StrAppend(&text, "layouts change, names stay ", i, ".\n");
  WriteText(dir + "/corpus.txt", text);
  WriteText(dir + "/from.yaml",
            Yaml(dir + "/corpus.txt", p.residual, p.from_schedule, p.from_workers, p.from_layers));
  WriteText(dir + "/to.yaml",
            Yaml(dir + "/corpus.txt", p.residual, p.to_schedule, p.to_workers, p.to_layers));
  const std::string log = dir + "/log.txt", ref = dir + "/ref";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", dir, "/from.yaml --out ", ref,
                                    DeviceFlag(p.from_device)),
                       log),
            0)
      << ReadText(log);
  const std::string want = Tensors(ref);
  ASSERT_FALSE(want.empty());
  // Step 10 of the first layout → the second.
  const std::string a = CopyRunAsOfStep(ref, dir + "/as_other_layout", 10);
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " launch --resume ", a, " --config ", dir,
                                    "/to.yaml", DeviceFlag(p.to_device)),
                       log),
            0)
      << ReadText(log);
  EXPECT_NE(ReadText(log).find("continuing from " + a + "/checkpoints/step-000010"),
            std::string::npos);
  if (!p.to_device.empty()) {
    EXPECT_NE(ReadText(log).find(", device " + p.to_device), std::string::npos)
        << "the resumed workers did not run on " << p.to_device;
  }
  EXPECT_TRUE(Tensors(a) == want) << p.to_schedule << " resume differs";
  // Step 10 of the first layout → single process.
  const std::string b = CopyRunAsOfStep(ref, dir + "/as_single", 10);
  ASSERT_EQ(
      RunCommand(
          absl::StrCat(XhcBinary(), " train --config ", dir, "/from.yaml --resume --out ", b), log),
      0)
      << ReadText(log);
  EXPECT_TRUE(Tensors(b) == want) << "single-process resume differs";
}

INSTANTIATE_TEST_SUITE_P(
    Residuals, LayoutChange,
    ::testing::Values(
        Layouts{"xhc", "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: [2]}",
                "dualpipev", 4, "1f1b", 2},
        Layouts{"hc", "{type: hc, n_streams: 4}", "dualpipev", 4, "1f1b", 2},
        Layouts{"xhc_flash4",
                "{type: xhc_flash, window: 4, n_streams: 6, n_active: 3, "
                "n_fixed: 1, conv_kernels: [2]}",
                "dualpipev", 2, "1f1b", 4},
        Layouts{"uneven_to_even",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2]}",
                "1f1b", 4, "dualpipev", 2, "first_stage_layers: 0, last_stage_layers: 3"},
        Layouts{"even_to_uneven",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2]}",
                "dualpipev", 2, "zb1p", 2, "", "first_stage_layers: 1"},
        Layouts{"host_device_to_cpu",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2]}",
                "dualpipev", 2, "1f1b", 2, "", "", "host:1", ""},
        Layouts{"cpu_to_host_device",
                "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, "
                "conv_kernels: [2]}",
                "1f1b", 2, "dualpipev", 2, "", "", "", "host:2"}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace xhc::testing
