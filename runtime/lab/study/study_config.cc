#include "runtime/lab/study/study_config.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/common/config.h"
#include "runtime/common/config_reader.h"
#include "runtime/lab/lab_config.h"
#include "yaml-cpp/yaml.h"

namespace xhc::study {
namespace {

absl::Status ReadStudyBlock(ConfigReader& r, StudyConfig* c) {
  RETURN_IF_ERROR(r.Get("schedules", &c->schedules));
  RETURN_IF_ERROR(r.Get("residuals", &c->residuals));
  RETURN_IF_ERROR(r.Get("devices", &c->devices));
  RETURN_IF_ERROR(r.Get("stages", &c->stages));
  RETURN_IF_ERROR(r.Get("microbatch_factors", &c->microbatch_factors));
  RETURN_IF_ERROR(r.Get("steps", &c->steps));
  RETURN_IF_ERROR(r.Get("warmup_steps", &c->warmup_steps));
  RETURN_IF_ERROR(r.Get("threads_per_worker", &c->threads_per_worker));
  RETURN_IF_ERROR(r.Get("simulate_ranks", &c->simulate_ranks));
  RETURN_IF_ERROR(r.Get("run_timeout_s", &c->run_timeout_s));
  RETURN_IF_ERROR(r.Finish());
  const std::set<std::string> known_residuals = {"vanilla", "hc", "mhc", "xhc", "xhc_flash"};
  for (const std::string& res : c->residuals) {
    if (!known_residuals.count(res)) {
      return InvalidKey(r.Key("residuals"), absl::StrCat("unknown residual type '", res, "'"));
    }
  }
  if (c->schedules.empty()) return InvalidKey(r.Key("schedules"), "empty");
  if (c->residuals.empty()) return InvalidKey(r.Key("residuals"), "empty");
  if (c->microbatch_factors.empty()) return InvalidKey(r.Key("microbatch_factors"), "empty");
  if (c->devices < 1) return InvalidKey(r.Key("devices"), "must be >= 1");
  if (c->stages < 2 || c->stages % 2 != 0) {
    return InvalidKey(r.Key("stages"), "must be even and >= 2 (dualpipev folds PP/2 ranks)");
  }
  if (c->steps <= c->warmup_steps || c->warmup_steps < 0) {
    return InvalidKey(r.Key("steps"), absl::StrCat("steps ", c->steps, " must exceed warmup_steps ",
                                                   c->warmup_steps, " (nothing left to measure)"));
  }
  if (c->threads_per_worker < 1) return InvalidKey(r.Key("threads_per_worker"), "must be >= 1");
  return absl::OkStatus();
}

// The residual block of one run: vanilla, hc and mhc from their definitions (N = 1, 4, 4),
// xhc and xhc_flash from the job's own block so a study can vary k, m or the conv kernels
// (the window only where the run is xhc_flash).
YAML::Node ResidualNode(const std::string& residual, const YAML::Node& job_residual) {
  YAML::Node node;
  node["type"] = residual;
  const bool wide = residual == "xhc" || residual == "xhc_flash";
  if (wide && job_residual && job_residual.IsMap()) {
    node = YAML::Clone(job_residual);
    node["type"] = residual;
    if (residual == "xhc") node.remove("window");
  } else if (residual == "mhc" || residual == "hc") {
    node["n_streams"] = 4;
  }
  if (residual == "mhc" && job_residual && job_residual["sinkhorn_iters"]) {
    node["sinkhorn_iters"] = job_residual["sinkhorn_iters"];
  }
  return node;
}

}  // namespace

absl::StatusOr<StudyConfig> ParseStudyConfig(const std::string& yaml_text) {
  StudyConfig c;
  ASSIGN_OR_RETURN(YAML::Node job, lab::ParseLabConfig(yaml_text, "study", [&c](ConfigReader& r) {
                     return ReadStudyBlock(r, &c);
                   }));
  if (job["pipeline"]) {
    return InvalidKey("job.pipeline", "set per run by the study; remove it from the job block");
  }
  c.job_yaml = YAML::Dump(job);
  return c;
}

absl::StatusOr<StudyConfig> LoadStudyConfig(const std::string& path) {
  return ParseFile(path, [](const std::string& text) { return ParseStudyConfig(text); });
}

int StagesFor(const std::string& schedule, int num_ranks) {
  return schedule == "dualpipev" ? 2 * num_ranks : num_ranks;
}

namespace {

absl::StatusOr<RunSpec> MakeRun(const StudyConfig& c, const std::string& comparison,
                                const std::string& schedule, const std::string& residual,
                                int num_ranks, int num_microbatches) {
  RunSpec run;
  run.comparison = comparison;
  run.schedule = schedule;
  run.residual = residual;
  run.num_ranks = num_ranks;
  run.num_stages = StagesFor(schedule, num_ranks);
  run.num_microbatches = num_microbatches;
  run.id = absl::StrCat(residual, "-", schedule, "-R", num_ranks, "-M", num_microbatches);
  YAML::Node job = YAML::Load(c.job_yaml);
  job["model"]["residual"] = ResidualNode(residual, job["model"]["residual"]);
  job["train"]["steps"] = c.steps;
  job["train"]["microbatches"] = num_microbatches;
  job["train"]["eval_every"] = 0;
  job["pipeline"]["schedule"] = schedule;
  job["pipeline"]["workers"] = num_ranks;
  // Only the final checkpoint is written, after the last timed step.
  job["checkpoint"]["every"] = 0;
  job["checkpoint"]["keep"] = 1;
  ASSIGN_OR_RETURN(run.job_yaml, lab::RunJobYaml(run.id, job));
  return run;
}

}  // namespace

absl::StatusOr<std::vector<RunSpec>> ExpandRuns(const StudyConfig& c) {
  std::vector<RunSpec> runs;
  for (int factor : c.microbatch_factors) {
    const int m = factor * c.stages;
    for (const std::string& residual : c.residuals) {
      for (const std::string& schedule : c.schedules) {
        ASSIGN_OR_RETURN(RunSpec run,
                         MakeRun(c, "equal-devices", schedule, residual, c.devices, m));
        runs.push_back(std::move(run));
      }
      for (const std::string& schedule : c.schedules) {
        if (StagesFor(schedule, c.devices) == c.stages) continue;  // already run above
        const int ranks = schedule == "dualpipev" ? c.stages / 2 : c.stages;
        ASSIGN_OR_RETURN(RunSpec run, MakeRun(c, "equal-stages", schedule, residual, ranks, m));
        runs.push_back(std::move(run));
      }
    }
  }
  return runs;
}

}  // namespace xhc::study
