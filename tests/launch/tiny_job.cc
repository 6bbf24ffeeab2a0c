#include "tests/launch/tiny_job.h"

#include "absl/strings/str_cat.h"
#include "tests/util/run_util.h"

namespace xhc::testing {

std::string WriteTinyJob(const std::string& dir, int steps) {
  const std::string corpus = dir + "/corpus.txt";
  std::string text;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&text, "Launchers hand out ranks; ", i, ".\n");
  WriteText(corpus, text);
  const std::string path = dir + "/config.yaml";
  WriteText(path, absl::StrCat(
                      "model: {d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, d_ff: 32, "
                      "seq_len: 8, residual: {type: xhc, n_streams: 4, n_active: 2, n_fixed: 1}}\n"
                      "train: {steps: ",
                      steps,
                      ", batch_size: 1, microbatches: 2, seed: 5, "
                      "eval_every: 0}\n"
                      "data: {train: ",
                      corpus,
                      "}\n"
                      "pipeline: {schedule: 1f1b, workers: 2}\n"
                      "checkpoint: {every: 0}\n"));
  return path;
}

absl::StatusOr<std::vector<std::string>> SingleProcessLosses(const std::string& dir,
                                                             const std::string& config) {
  const std::string log = dir + "/train.log";
  if (RunCommand(absl::StrCat(XhcBinary(), " train --config ", config, " --out ", dir, "/single"),
                 log) != 0) {
    return absl::InternalError(absl::StrCat("xhc train failed:\n", ReadText(log)));
  }
  return MicrobatchLosses(dir + "/single");
}

}  // namespace xhc::testing
