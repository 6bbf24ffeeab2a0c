// xhc sample --checkpoint DIR --prompt TEXT [--tokens N] [--temperature X] [--seed S]
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "base/hash.h"
#include "base/status_macros.h"
#include "runtime/control/cli/cli_util.h"
#include "runtime/control/cli/commands.h"
#include "runtime/control/cli/model_loader.h"
#include "runtime/model/stage.h"

namespace xhc::cli {
namespace {

// Draws the next byte from the logits of the last position (greedy at temperature 0).
int NextToken(const float* logits, int V, double temperature, uint64_t key) {
  int best = 0;
  for (int v = 1; v < V; ++v) {
    if (logits[v] > logits[best]) best = v;
  }
  if (temperature <= 0) return best;
  std::vector<double> p(V);
  double sum = 0;
  for (int v = 0; v < V; ++v) {
    p[v] = std::exp((logits[v] - logits[best]) / temperature);
    sum += p[v];
  }
  double u = static_cast<double>(Mix64(key) >> 11) * 0x1.0p-53 * sum;
  for (int v = 0; v < V; ++v) {
    u -= p[v];
    if (u <= 0) return v;
  }
  return best;
}

absl::Status Sample(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      Flags flags,
      ParseFlagsOrHelp("sample",
                       "--checkpoint DIR --prompt TEXT [--tokens N] [--temperature X] [--seed S]",
                       args,
                       {{"checkpoint", "run, checkpoint root or step directory", false, true},
                        {"prompt", "text to continue", false, true},
                        {"tokens", "bytes to generate (default 200)"},
                        {"temperature", "softmax temperature, 0 = greedy (default 0.8)"},
                        {"seed", "sampling seed (default 1)"}}));
  ASSIGN_OR_RETURN(int64_t num_tokens, flags.GetCount("tokens", 200));
  ASSIGN_OR_RETURN(double temperature, flags.GetDouble("temperature", 0.8));
  if (!(temperature >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--temperature: must be at least 0 (got ", flags.Get("temperature"), ")"));
  }
  ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed", 1));
  ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelFromFlags(flags, 0));
  const int window = loaded.config.seq_len;
  std::vector<int32_t> context;
  for (unsigned char c : flags.Get("prompt")) context.push_back(c);
  if (context.empty()) return absl::InvalidArgumentError("--prompt must not be empty");
  std::printf("%s", flags.Get("prompt").c_str());
  std::vector<float> logits;
  for (int64_t i = 0; i < num_tokens; ++i) {
    // The model sees at most its training window: the most recent `window` bytes.
    const size_t start = context.size() > static_cast<size_t>(window) ? context.size() - window : 0;
    std::vector<int32_t> input(context.begin() + start, context.end());
    ModelConfig cfg = loaded.config;
    cfg.seq_len = static_cast<int>(input.size());
    model::StageModel model(cfg, model::StageSpec::Full(cfg), loaded.params.get());
    RETURN_IF_ERROR(
        model.ForwardOnly(1, input.data(), nullptr, nullptr, nullptr, &logits).status());
    const int V = cfg.vocab_size;
    const int next = NextToken(&logits[(input.size() - 1) * V], V, temperature,
                               static_cast<uint64_t>(seed) * 1000003u + i);
    context.push_back(next);
    std::putchar(next);
    std::fflush(stdout);
  }
  std::putchar('\n');
  return absl::OkStatus();
}

}  // namespace

int RunSample(const std::vector<std::string>& args) {
  absl::Status s = Sample(args);
  return s.ok() ? 0 : Fail("sample", s);
}

}  // namespace xhc::cli
