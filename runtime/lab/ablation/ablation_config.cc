#include "runtime/lab/ablation/ablation_config.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/common/config.h"
#include "runtime/common/config_reader.h"
#include "runtime/lab/lab_config.h"
#include "yaml-cpp/yaml.h"

namespace xhc::ablation {
namespace {

// The paper's ablation rows (README's residual table): N = 4 for hc and mhc, N = 16 with
// k = 4 of them active (2 fixed) for xhc and xhc_flash, kernels [4, 8, 12] where used.
const std::vector<std::pair<std::string, std::string>>& Table() {
  static const auto* t = new std::vector<std::pair<std::string, std::string>>{
      {"vanilla", "{type: vanilla}"},
      {"hc", "{type: hc, n_streams: 4}"},
      {"mhc4", "{type: mhc, n_streams: 4}"},
      {"mhc4_conv", "{type: mhc, n_streams: 4, conv_kernels: [4, 8, 12]}"},
      {"mhc16", "{type: mhc, n_streams: 16}"},
      {"xhc", "{type: xhc, n_streams: 16, n_active: 4, n_fixed: 2, conv_kernels: [4, 8, 12]}"},
      {"xhc_flash2",
       "{type: xhc_flash, n_streams: 16, n_active: 4, n_fixed: 2, "
       "conv_kernels: [4, 8, 12], window: 2}"},
      {"xhc_flash4",
       "{type: xhc_flash, n_streams: 16, n_active: 4, n_fixed: 2, "
       "conv_kernels: [4, 8, 12], window: 4}"},
  };
  return *t;
}

absl::Status ReadBlock(ConfigReader& r, AblationConfig* c) {
  RETURN_IF_ERROR(r.Get("variants", &c->variants));
  RETURN_IF_ERROR(r.Get("seeds", &c->seeds));
  RETURN_IF_ERROR(r.Get("steps", &c->steps));
  RETURN_IF_ERROR(r.Get("eval_every", &c->eval_every));
  RETURN_IF_ERROR(r.Get("parallel_runs", &c->parallel_runs));
  RETURN_IF_ERROR(r.Get("threads_per_run", &c->threads_per_run));
  RETURN_IF_ERROR(r.Get("run_timeout_s", &c->run_timeout_s));
  RETURN_IF_ERROR(r.Get("diagnostics_batch", &c->diagnostics_batch));
  RETURN_IF_ERROR(r.Finish());
  if (c->variants.empty()) return InvalidKey(r.Key("variants"), "empty");
  std::set<std::string> seen;
  for (const std::string& v : c->variants) {
    if (!VariantResidualYaml(v).ok()) {
      std::string known;
      for (const std::string& k : KnownVariants())
        absl::StrAppend(&known, known.empty() ? "" : ", ", k);
      return InvalidKey(r.Key("variants"),
                        absl::StrCat("unknown variant '", v, "' (known: ", known, ")"));
    }
    if (!seen.insert(v).second)
      return InvalidKey(r.Key("variants"), absl::StrCat("'", v, "' twice"));
  }
  if (c->seeds.empty()) return InvalidKey(r.Key("seeds"), "empty");
  if (std::set<int>(c->seeds.begin(), c->seeds.end()).size() != c->seeds.size()) {
    return InvalidKey(r.Key("seeds"), "a seed appears twice");
  }
  if (c->steps < 1) return InvalidKey(r.Key("steps"), "must be >= 1");
  if (c->eval_every < 1 || c->eval_every > c->steps) {
    return InvalidKey(r.Key("eval_every"), "must be in [1, steps]");
  }
  if (c->parallel_runs < 1) return InvalidKey(r.Key("parallel_runs"), "must be >= 1");
  if (c->threads_per_run < 1) return InvalidKey(r.Key("threads_per_run"), "must be >= 1");
  if (c->run_timeout_s <= 0) return InvalidKey(r.Key("run_timeout_s"), "must be > 0");
  if (c->diagnostics_batch < 1) return InvalidKey(r.Key("diagnostics_batch"), "must be >= 1");
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& KnownVariants() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>;
    for (const auto& [name, yaml] : Table()) v->push_back(name);
    return v;
  }();
  return *names;
}

absl::StatusOr<std::string> VariantResidualYaml(const std::string& variant) {
  for (const auto& [name, yaml] : Table()) {
    if (name == variant) return yaml;
  }
  return absl::NotFoundError(absl::StrCat("unknown variant '", variant, "'"));
}

absl::StatusOr<AblationConfig> ParseAblationConfig(const std::string& yaml_text) {
  AblationConfig c;
  ASSIGN_OR_RETURN(YAML::Node job,
                   lab::ParseLabConfig(yaml_text, "ablation",
                                       [&c](ConfigReader& r) { return ReadBlock(r, &c); }));
  for (const char* key : {"pipeline", "checkpoint"}) {
    if (job[key]) {
      return InvalidKey(absl::StrCat("job.", key), "set per run by the study; remove it");
    }
  }
  if (job["train"] &&
      (job["train"]["steps"] || job["train"]["seed"] || job["train"]["eval_every"])) {
    return InvalidKey("job.train", "steps, seed and eval_every come from the ablation block");
  }
  c.job_yaml = YAML::Dump(job);
  return c;
}

absl::StatusOr<AblationConfig> LoadAblationConfig(const std::string& path) {
  return ParseFile(path, [](const std::string& text) { return ParseAblationConfig(text); });
}

absl::StatusOr<std::vector<AblationRun>> ExpandAblationRuns(const AblationConfig& c) {
  std::vector<AblationRun> runs;
  for (const std::string& variant : c.variants) {
    for (int seed : c.seeds) {
      AblationRun run;
      run.id = absl::StrCat(variant, "-s", seed);
      run.variant = variant;
      run.seed = seed;
      YAML::Node job = YAML::Load(c.job_yaml);
      ASSIGN_OR_RETURN(std::string residual, VariantResidualYaml(variant));
      YAML::Node res = YAML::Load(residual);
      if (job["model"]["residual"] && job["model"]["residual"]["sinkhorn_iters"] &&
          variant != "vanilla" && variant != "hc") {
        res["sinkhorn_iters"] = job["model"]["residual"]["sinkhorn_iters"];
      }
      job["model"]["residual"] = res;
      job["train"]["steps"] = c.steps;
      job["train"]["seed"] = seed;
      job["train"]["eval_every"] = c.eval_every;
      job["train"]["log_every"] = c.eval_every;
      job["checkpoint"]["every"] = 0;  // only the final one, which the diagnostics read
      job["checkpoint"]["keep"] = 1;
      ASSIGN_OR_RETURN(run.job_yaml, lab::RunJobYaml(run.id, job));
      runs.push_back(std::move(run));
    }
  }
  return runs;
}

}  // namespace xhc::ablation
