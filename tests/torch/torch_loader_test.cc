// python/xhc_torch.py against the runtime, as real processes: for every residual type a tiny
// model is trained a few steps with `xhc train` (at a learning rate high enough to move the
// convolutions and maps well away from their initial values, so that a wrong Gram-Schmidt,
// Sinkhorn count or flash window shows: each of those changes the gradients by 6e-4 to 2e-2
// of their norm, where the two implementations differ by about 1e-7), then `xhc eval --dump-grads`
// and `xhc_torch.py eval --dump-grads` (the checkpoint loaded as a torch.nn.Module) evaluate the
// same batch. Their losses must agree to 1e-5 relative, and every parameter's gradient to
// 1e-4 of the whole gradient's norm (L2 of the difference). A checkpoint written by a
// 2-worker pipeline job (one shard per stage) loads and agrees the same way.
// Both sides run in float32. Skips, saying why, without a python3 that imports torch.
#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

constexpr int kBatch = 2, kSeqLen = 16;

std::string LoaderScript() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : ".",
                      "/python/xhc_torch.py");
}

// The first interpreter that imports torch: $XHC_TORCH_PYTHON, then Debian's /usr/bin/python3
// (python3-torch installs there; a pyenv python3 earlier on PATH usually lacks it), then the
// python3 on PATH. "" when none does.
std::string TorchPython(const std::string& log) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("XHC_TORCH_PYTHON"); env && *env) candidates.push_back(env);
  candidates.push_back("/usr/bin/python3");
  candidates.push_back("python3");
  for (const std::string& py : candidates) {
    if (RunCommand(absl::StrCat(py, " -c 'import torch, numpy, yaml'"), log) == 0) return py;
  }
  return "";
}

// Loss printed as {"loss": X} by both eval commands (the last such line of the log).
double LossOf(const std::string& text) {
  const size_t at = text.rfind("{\"loss\": ");
  if (at == std::string::npos) return NAN;
  return std::strtod(text.c_str() + at + 9, nullptr);
}

class TorchLoader : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string* python =
        new std::string(TorchPython(FreshDir("torch_probe") + "/probe.txt"));
    python_ = *python;  // probed once: importing torch takes a second
    if (python_.empty()) {
      XHC_SKIP_OR_FAIL("no python3 with torch, numpy and yaml (Debian: apt-get install "
                       "python3-torch python3-yaml; or set XHC_TORCH_PYTHON)");
    }
  }

  // A corpus and a config under a fresh directory; returns the directory.
  std::string WriteJob(const std::string& name, const std::string& residual,
                       const std::string& extra) {
    const std::string dir = FreshDir("torch_" + name);
    std::string text;
    for (int i = 0; i < 200; ++i) absl::StrAppend(&text, "Tensors travel by name, ", i, ".\n");
    WriteText(dir + "/corpus.txt", text);
    WriteText(dir + "/config.yaml",
              absl::StrCat("model: {d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, "
                           "d_ff: 32, seq_len: ",
                           kSeqLen, ", residual: ", residual,
                           "}\n"
                           "train: {steps: 5, batch_size: 2, microbatches: 2, seed: 11, "
                           "eval_every: 0}\n"
                           "optim: {lr: 0.02, warmup_steps: 0}\n"
                           "data: {train: ",
                           dir,
                           "/corpus.txt}\n"
                           "checkpoint: {every: 5}\n",
                           extra));
    return dir;
  }

  // Evaluates run_dir's checkpoint with both implementations and compares.
  void Compare(const std::string& dir, const std::string& run) {
    const std::string log = dir + "/log.txt";
    const std::string eval_args =
        absl::StrCat(" eval --checkpoint ", run, " --data ", dir, "/corpus.txt --batch ", kBatch,
                     " --seq-len ", kSeqLen, " --dump-grads ");
    const std::string xhc_log = dir + "/xhc_eval.txt", torch_log = dir + "/torch_eval.txt";
    ASSERT_EQ(
        RunCommand(absl::StrCat(XhcBinary(), eval_args, dir, "/xhc_grads.safetensors"), xhc_log), 0)
        << ReadText(xhc_log);
    ASSERT_EQ(RunCommand(absl::StrCat(python_, " ", LoaderScript(), eval_args, dir,
                                      "/torch_grads.safetensors"),
                         torch_log),
              0)
        << ReadText(torch_log);
    const double xhc_loss = LossOf(ReadText(xhc_log)), torch_loss = LossOf(ReadText(torch_log));
    ASSERT_TRUE(std::isfinite(xhc_loss) && xhc_loss > 0) << ReadText(xhc_log);
    EXPECT_NEAR(torch_loss, xhc_loss, 1e-5 * xhc_loss) << ReadText(torch_log);

    absl::StatusOr<SafetensorsContents> ref = ReadSafetensorsPath(dir + "/xhc_grads.safetensors");
    absl::StatusOr<SafetensorsContents> got = ReadSafetensorsPath(dir + "/torch_grads.safetensors");
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->tensors.size(), ref->tensors.size());
    double norm2 = 0;
    for (const auto& [name, t] : ref->tensors) {
      for (float v : t.values) norm2 += double(v) * v;
    }
    const double norm = std::sqrt(norm2);
    ASSERT_GT(norm, 0);
    for (const auto& [name, t] : ref->tensors) {
      auto it = got->tensors.find(name);
      ASSERT_NE(it, got->tensors.end()) << "torch has no gradient for " << name;
      ASSERT_EQ(it->second.shape, t.shape) << name;
      double diff2 = 0;
      for (size_t i = 0; i < t.values.size(); ++i) {
        const double d = double(it->second.values[i]) - t.values[i];
        diff2 += d * d;
      }
      EXPECT_LE(std::sqrt(diff2) / norm, 1e-4) << name << " (gradient norm " << norm << ")";
    }
  }

  std::string python_;
};

struct Variant {
  std::string name, residual;
};

class TorchLoaderVariants : public TorchLoader, public ::testing::WithParamInterface<Variant> {};

TEST_P(TorchLoaderVariants, LossAndGradientsMatchXhcEval) {
  const Variant& v = GetParam();
  const std::string dir = WriteJob(v.name, v.residual, "");
  const std::string run = dir + "/run", log = dir + "/train.txt";
  ASSERT_EQ(
      RunCommand(absl::StrCat(XhcBinary(), " train --config ", dir, "/config.yaml --out ", run),
                 log),
      0)
      << ReadText(log);
  Compare(dir, run);
}

INSTANTIATE_TEST_SUITE_P(
    Residuals, TorchLoaderVariants,
    ::testing::Values(
        Variant{"vanilla", "{type: vanilla}"}, Variant{"hc", "{type: hc}"},
        Variant{"mhc", "{type: mhc}"}, Variant{"mhc_conv", "{type: mhc, conv_kernels: [2, 3]}"},
        Variant{"xhc", "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: [2, 4]}"},
        Variant{"xhc_no_gram_schmidt",
                "{type: xhc, n_streams: 4, n_active: 2, conv_kernels: [3], gram_schmidt: false}"},
        Variant{"xhc_flash2", "{type: xhc_flash, n_streams: 6, n_active: 3}"},
        Variant{"xhc_flash4", "{type: xhc_flash, window: 4, n_streams: 6, n_active: 3}"}),
    [](const auto& info) { return info.param.name; });

// A 2-worker pipeline writes one shard per stage (layout differs from xhc train's single
// model.safetensors); the loader finds every tensor by name across them.
TEST_F(TorchLoader, PipelineCheckpointLoads) {
  const std::string dir = WriteJob("pipeline", "{type: xhc, n_streams: 4, n_active: 2, n_fixed: 1}",
                                   "pipeline: {schedule: 1f1b, workers: 2}\n");
  const std::string run = dir + "/run", log = dir + "/launch.txt";
  ASSERT_EQ(
      RunCommand(absl::StrCat(XhcBinary(), " launch --config ", dir, "/config.yaml --out ", run),
                 log),
      0)
      << ReadText(log);
  absl::StatusOr<std::string> step = LatestStepDir(run + "/checkpoints");
  ASSERT_TRUE(step.ok()) << step.status();
  absl::StatusOr<LoadedCheckpoint> ckpt = LoadCheckpoint(*step);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_EQ(ckpt->manifest.shards.size(), 2u) << ckpt->manifest.layout;
  EXPECT_NE(ckpt->manifest.shards[0].file, "model.safetensors");
  Compare(dir, run);
}

// model.state_dict() carries the spec names: saved with save_safetensors, `xhc eval
// --weights` reads it and gives the checkpoint's loss bit for bit (float32 both ways).
TEST_F(TorchLoader, StateDictRoundTripsThroughXhcEval) {
  const std::string dir = WriteJob("state_dict", "{type: xhc, n_streams: 4, n_active: 2}", "");
  const std::string run = dir + "/run", log = dir + "/log.txt";
  ASSERT_EQ(
      RunCommand(absl::StrCat(XhcBinary(), " train --config ", dir, "/config.yaml --out ", run),
                 log),
      0)
      << ReadText(log);
  const std::string script_dir = LoaderScript().substr(0, LoaderScript().rfind('/'));
  ASSERT_EQ(RunCommand(absl::StrCat(python_, " -c 'import sys; sys.path.insert(0, \"", script_dir,
                                    "\"); import xhc_torch; xhc_torch.save_safetensors(xhc_torch."
                                    "load(\"",
                                    run, "\").state_dict(), \"", dir, "/state.safetensors\")'"),
                       log),
            0)
      << ReadText(log);
  const std::string data =
      absl::StrCat(" --data ", dir, "/corpus.txt --batch ", kBatch, " --seq-len ", kSeqLen);
  const std::string from_ckpt = dir + "/ckpt.txt", from_state = dir + "/state.txt";
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " eval --checkpoint ", run, data), from_ckpt), 0)
      << ReadText(from_ckpt);
  ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " eval --config ", dir, "/config.yaml --weights ",
                                    dir, "/state.safetensors", data),
                       from_state),
            0)
      << ReadText(from_state);
  EXPECT_EQ(ReadText(from_state), ReadText(from_ckpt));
}

}  // namespace
}  // namespace xhc::testing
