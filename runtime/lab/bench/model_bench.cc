// Model throughput on CPU for every residual variant at the same size (default d_model 512,
// 4 layers, seq 256): tokens/s, model FLOP/s against an sgemm rate measured in the same run,
// and the step-time ratios to vanilla. Steps of the models are interleaved round by round so
// machine noise hits them alike; each figure is the median over rounds. step_time_vs_vanilla
// is the ratio of the medians; paired_vs_vanilla the median of each round's own ratio (the
// variant's step over vanilla's in the same round, a second or two apart), which follows the
// VM neighbours' slow swings in speed less (both printed, with every round's ratio);
// best_vs_vanilla the ratio of the fastest steps, which noise that only ever slows a step
// (a neighbour's burst) leaves alone as long as each model had one quiet round.
//
//   bazel run //runtime/lab/bench:model_bench -- [--d_model 512] [--layers 4] [--seq 256]
//                                            [--batch 4] [--rounds 5]
//                                            [--variants vanilla,hc,mhc,mhc_conv,xhc,...]
//                                            [--phases 1]
// --phases 1 adds each variant's wall time per step by kind of work (residual kernels,
// attention/MLP, head, embedding; forward, input and weight gradients: model/phase_times.h).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/cpu_info.h"
#include "base/median.h"
#include "base/process_env.h"
#include "kernels/cpu/nn/matmul.h"
#include "kernels/cpu/xhc/skinny_gemm_isa.h"
#include "runtime/common/config.h"
#include "runtime/data/sampler.h"
#include "runtime/model/stage.h"
#include "runtime/train/optimizer.h"
#include "third_party/openblas_cblas.h"

namespace xhc {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int d_model = 512, layers = 4, seq = 256, batch = 4, rounds = 5;
  std::string variants = "vanilla,hc,mhc,mhc_conv,xhc,xhc_flash2,xhc_flash4";
  bool phases = false;
};

// The residual block of each variant (spec section 1 defaults otherwise).
const std::map<std::string, std::string>& VariantResiduals() {
  static const auto* m = new std::map<std::string, std::string>{
      {"vanilla", "{type: vanilla}"},
      {"hc", "{type: hc}"},
      {"mhc", "{type: mhc}"},
      {"mhc_conv", "{type: mhc, conv_kernels: [4, 8, 12]}"},
      {"xhc", "{type: xhc}"},
      {"xhc_flash2", "{type: xhc_flash, window: 2}"},
      {"xhc_flash4", "{type: xhc_flash, window: 4}"},
  };
  return *m;
}

struct Run {
  std::string name;
  ModelConfig cfg;
  std::unique_ptr<model::ParamSetT<float>> params;
  std::unique_ptr<model::StageModel> model;
  std::vector<double> step_s;
  double matmul_params = 0;  // parameters of the transformer GEMMs (excl. embedding)
  std::unique_ptr<model::PhaseTimes> phases;  // --phases: summed over the measured rounds
};

absl::StatusOr<Run> MakeRun(const std::string& name, const Options& o) {
  Run r;
  r.name = name;
  auto it = VariantResiduals().find(name);
  if (it == VariantResiduals().end()) {
    return absl::InvalidArgumentError(absl::StrCat("--variants: unknown variant '", name, "'"));
  }
  std::string yaml = absl::StrFormat(
      "model: {d_model: %d, n_layers: %d, n_heads: 8, n_kv_heads: 8, seq_len: %d, "
      "residual: %s}\n",
      o.d_model, o.layers, o.seq, it->second);
  absl::StatusOr<Config> config = ParseConfig(yaml);
  if (!config.ok()) return config.status();
  r.cfg = config->model;
  const auto spec = model::StageSpec::Full(r.cfg);
  r.params = std::make_unique<model::ParamSetT<float>>(model::BuildStageParams<float>(r.cfg, spec));
  model::InitParams(r.cfg, 1, r.params.get());
  r.model = std::make_unique<model::StageModel>(r.cfg, spec, r.params.get());
  const double C = r.cfg.d_model, F = r.cfg.d_ff;
  r.matmul_params = r.cfg.n_layers * (4 * C * C + 3 * C * F) + C * r.cfg.vocab_size;
  return r;
}

double Step(Run& r, const TokenBatch& b, int64_t step) {
  const auto t0 = Clock::now();
  r.params->ZeroGrads();
  (void)*r.model->Forward(0, b.batch, b.inputs.data(), b.targets.data(), nullptr, nullptr);
  (void)r.model->Backward(0, 1.0, nullptr, nullptr);  // as `xhc train` runs it
  r.params->FinalizeGrads();
  OptimConfig optim;
  train::ApplyAdamW(optim, 1000, step, std::sqrt(train::GradSumOfSquares(*r.params)),
                    r.params.get());
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Single-thread sgemm rate (the kernels run one sgemm per OpenMP thread) × threads.
double SgemmGflops() {
  const int n = 512;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  openblas_set_num_threads(1);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  return best * omp_get_max_threads();
}

int Main(const Options& o) {
  std::vector<Run> runs;
  for (absl::string_view name : absl::StrSplit(o.variants, ',')) {
    absl::StatusOr<Run> run = MakeRun(std::string(name), o);
    if (!run.ok()) {
      std::fprintf(stderr, "model_bench: %s\n", std::string(run.status().message()).c_str());
      return 2;
    }
    runs.push_back(*std::move(run));
  }
  if (runs.empty() || runs[0].name != "vanilla") {
    std::fprintf(stderr, "model_bench: --variants must start with vanilla (the baseline)\n");
    return 2;
  }
  std::vector<uint8_t> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 131 + i / 7) % 251);
  BatchSampler sampler(&data, 7, o.batch, o.seq);
  double sgemm = SgemmGflops();
  // Two rounds warm up: after the first, the variants' frees have reshuffled the heap, and the
  // first variant's next step still took fresh pages (vanilla: 22 MiB, 5.6k faults, ~0.3 s on
  // this VM, which added ~80 ms to its mean sublayer_fwd at --rounds 4). From the third on, no
  // step faults (the allocator policy of base/process_env.h).
  for (int round = -2; round < o.rounds; ++round) {
    for (Run& r : runs) {
      if (o.phases && round == 0) {
        r.phases = std::make_unique<model::PhaseTimes>();
        r.model->set_phase_times(r.phases.get());
      }
      const double s = Step(r, sampler.Train(round + 2, 0), round + 2);
      if (round >= 0) r.step_s.push_back(s);
    }
    if (round < 0) {
      std::fprintf(stderr, "warm-up round %d/2 done\n", round + 3);
    } else {
      std::fprintf(stderr, "round %d/%d done\n", round + 1, o.rounds);
    }
  }
  sgemm = std::max(sgemm, SgemmGflops());
  const double tokens = static_cast<double>(o.batch) * o.seq;
  const double vanilla = Median(runs[0].step_s);
  const double vanilla_best = *std::min_element(runs[0].step_s.begin(), runs[0].step_s.end());
  std::vector<std::string> parts;
  for (Run& r : runs) {
    const double s = Median(r.step_s);
    const double best = *std::min_element(r.step_s.begin(), r.step_s.end());
    std::vector<double> ratios;
    for (size_t i = 0; i < r.step_s.size(); ++i) ratios.push_back(r.step_s[i] / runs[0].step_s[i]);
    // 6·N for the GEMMs plus causal attention (QKᵀ and PV, forward and backward).
    const double flops =
        tokens * (6 * r.matmul_params + 6.0 * r.cfg.n_layers * o.seq * r.cfg.d_model);
    std::string phase_json;
    if (r.phases) {  // mean ms per step of each kind of work; "other": optimizer and the rest
      std::vector<std::string> ph;
      double timed = 0;
      for (int p = 0; p < model::PhaseTimes::kNumPhases; ++p) {
        const double ms = r.phases->seconds[p] * 1e3 / o.rounds;
        timed += ms;
        ph.push_back(absl::StrFormat("\"%s\": %.1f", model::PhaseTimes::Name(p), ms));
      }
      const double mean_ms =
          std::accumulate(r.step_s.begin(), r.step_s.end(), 0.0) * 1e3 / o.rounds;
      ph.push_back(absl::StrFormat("\"other\": %.1f", mean_ms - timed));
      phase_json = absl::StrCat(", \"phase_ms_per_step\": {", absl::StrJoin(ph, ", "), "}");
    }
    parts.push_back(absl::StrFormat(
        "\"%s\": {\"step_ms\": %.1f, \"tokens_per_s\": %.1f, \"model_gflops\": %.2f, "
        "\"fraction_of_sgemm\": %.3f, \"step_time_vs_vanilla\": %.3f, "
        "\"paired_vs_vanilla\": %.3f, \"best_step_ms\": %.1f, \"best_vs_vanilla\": %.3f, "
        "\"round_ratios\": [%s]%s}",
        r.name, s * 1e3, tokens / s, flops / s / 1e9, flops / s / 1e9 / sgemm, s / vanilla,
        Median(ratios), best * 1e3, best / vanilla_best,
        absl::StrJoin(ratios, ", ",
                      [](std::string* out, double v) { absl::StrAppendFormat(out, "%.3f", v); }),
        phase_json));
  }
  std::printf(
      "{\"d_model\": %d, \"layers\": %d, \"seq\": %d, \"batch\": %d, \"rounds\": %d, "
      "\"threads\": %d, \"cpu\": \"%s\", \"skinny_isa\": \"%s\", "
      "\"blas_coretype\": \"%s\", \"sgemm_gflops\": %.1f, %s}\n",
      o.d_model, o.layers, o.seq, o.batch, o.rounds, omp_get_max_threads(), CpuModelName().c_str(),
      kernels::cpu::ActiveSkinnyIsaName(),
      getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "default", sgemm,
      absl::StrJoin(parts, ", ").c_str());
  return 0;
}

}  // namespace
}  // namespace xhc

int main(int argc, char** argv) {
  xhc::MaybeReexecWithTunedEnv(argv);
  xhc::KeepFreedMemoryInProcess();
  xhc::Options o;
  // Flags come in pairs; a lone one (--help included) gets the usage, not a silent default run.
  if (argc % 2 == 0) {
    std::fprintf(stderr,
                 "usage: model_bench [--variants vanilla,...] [--phases 0|1] [--d_model C] "
                 "[--layers L] [--seq T] [--batch B] [--rounds R]\n");
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--variants")) {
      o.variants = argv[i + 1];
      continue;
    }
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--phases"))
      o.phases = v != 0;
    else if (!std::strcmp(argv[i], "--d_model"))
      o.d_model = v;
    else if (!std::strcmp(argv[i], "--layers"))
      o.layers = v;
    else if (!std::strcmp(argv[i], "--seq"))
      o.seq = v;
    else if (!std::strcmp(argv[i], "--batch"))
      o.batch = v;
    else if (!std::strcmp(argv[i], "--rounds"))
      o.rounds = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  return xhc::Main(o);
}
