#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_TINY_CONTROLLER_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_TINY_CONTROLLER_H_

// For the controller's unit tests: a controller of a 2-rank 1F1B job too small to train
// (d_model 16, one step), its run directory under TEST_TMPDIR named `run_name`. Nothing runs
// until a test drives it.

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/config.h"
#include "runtime/control/controller/controller.h"

namespace xhc::controller {

inline std::unique_ptr<Controller> MakeTinyController(const std::string& run_name) {
  absl::StatusOr<Config> config = ParseConfig(R"(
model: {vocab_size: 256, d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, seq_len: 8}
train: {steps: 1, batch_size: 1, microbatches: 2, eval_every: 0}
pipeline: {schedule: 1f1b, workers: 2}
checkpoint: {every: 0}
)");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  ControllerOptions options;
  options.workers = 2;
  options.quiet = true;
  const char* tmp = std::getenv("TEST_TMPDIR");
  options.run_dir = absl::StrCat(tmp ? tmp : "/tmp", "/", run_name);
  absl::StatusOr<std::unique_ptr<Controller>> c = Controller::Create(*config, options);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_TINY_CONTROLLER_H_
