#include "runtime/lab/study/study.h"

#include <chrono>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "runtime/common/config.h"
#include "runtime/lab/study/runner.h"

namespace xhc::study {
namespace {

namespace fs = std::filesystem;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string Clock(double s) {
  const int t = static_cast<int>(s + 0.5);
  return absl::StrFormat("%dm%02ds", t / 60, t % 60);
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

// Reads the run's outputs into `r`; any missing or malformed file is the run's failure.
absl::Status Measure(const StudyConfig& c, const std::string& run_dir, RunResult& r) {
  ASSIGN_OR_RETURN(std::string metrics, ReadWholeFile(run_dir + "/metrics.jsonl"));
  ASSIGN_OR_RETURN(r.metrics, ParseMetrics(metrics, c.warmup_steps));
  ASSIGN_OR_RETURN(std::string trace, ReadWholeFile(run_dir + "/trace.json"));
  ASSIGN_OR_RETURN(r.trace, ParseTrace(trace, r.spec.num_ranks, c.warmup_steps));
  r.costs = MeanStageCosts(r.trace);
  ASSIGN_OR_RETURN(Config job, ParseConfig(r.spec.job_yaml));
  r.payload_bytes =
      scheduler::PayloadBytes(static_cast<int64_t>(job.train.batch_size) * job.model.seq_len,
                              job.model.residual.n_streams, job.model.d_model, 4);
  ASSIGN_OR_RETURN(r.model,
                   ComputeModelBubbles(r.spec.schedule, r.spec.num_ranks, r.spec.num_microbatches,
                                       CostsFrom(r.costs, r.payload_bytes, r.trace.transfer_ms)));
  return absl::OkStatus();
}

RunResult ExecuteRun(const StudyOptions& o, const StudyConfig& c, const RunSpec& spec) {
  RunResult r;
  r.spec = spec;
  const std::string dir = absl::StrCat(o.out_dir, "/runs/", spec.id);
  std::error_code ec;
  fs::remove_all(dir, ec);  // a stale run directory would make launch resume or mix metrics
  fs::create_directories(dir, ec);
  const std::string cfg = dir + "/config.yaml", log = dir + "/log.txt";
  if (absl::Status s = WriteFile(cfg, spec.job_yaml); !s.ok()) {
    r.failure = s.ToString();
    return r;
  }
  const std::string threads = absl::StrCat(c.threads_per_worker);
  const ChildResult child = RunChild(
      {o.xhc_binary, "launch", "--config", cfg, "--workers", absl::StrCat(spec.num_ranks),
       "--steps", absl::StrCat(c.steps), "--out", dir + "/run"},
      {{"OMP_NUM_THREADS", threads}, {"OPENBLAS_NUM_THREADS", threads}}, log, c.run_timeout_s);
  r.wall_s = child.wall_s;
  if (!child.error.empty() || child.exit_code != 0) {
    r.failure = child.timed_out        ? absl::StrFormat("timed out after %.0f s", c.run_timeout_s)
                : !child.error.empty() ? child.error
                                       : absl::StrCat("exit code ", child.exit_code);
    absl::StrAppend(&r.failure, "\n", TailLines(log, 8));
    return r;
  }
  if (absl::Status s = Measure(c, dir + "/run", r); !s.ok()) {
    r.failure = absl::StrCat("measurement: ", s.ToString(), "\n", TailLines(log, 4));
    return r;
  }
  fs::copy_file(dir + "/run/trace.json",
                absl::StrCat(o.out_dir, "/traces/", spec.id, ".trace.json"),
                fs::copy_options::overwrite_existing, ec);
  fs::remove_all(dir + "/run/checkpoints", ec);  // weights are not part of the study
  r.ok = true;
  return r;
}

void SimulateAtScale(StudyOutcome& out) {
  const StudyConfig& c = out.config;
  for (const RunResult& r : out.runs) {
    if (!r.ok || r.spec.comparison != "equal-devices") continue;
    const int factor = r.spec.num_microbatches / c.stages;
    for (int ranks : c.simulate_ranks) {
      ScaledResult s{r.spec.residual, r.spec.schedule, ranks, factor * ranks};
      auto model = ComputeModelBubbles(s.schedule, ranks, s.num_microbatches,
                                       CostsFrom(r.costs, r.payload_bytes, r.trace.transfer_ms));
      if (!model.ok()) continue;  // e.g. a rank count the schedule does not support
      s.makespan_ms = model->makespan_ms;
      s.tokens_per_s = out.tokens_per_microbatch * s.num_microbatches /
                       std::max(model->makespan_ms * 1e-3, 1e-12);
      s.bubble_mean = Mean(model->simulated);
      if (!model->analytic.empty()) s.analytic_mean = Mean(model->analytic);
      out.scaled.push_back(s);
    }
  }
}

nlohmann::json ResultsJson(const StudyOutcome& out) {
  nlohmann::json runs = nlohmann::json::array();
  for (const RunResult& r : out.runs) {
    runs.push_back({{"id", r.spec.id},
                    {"comparison", r.spec.comparison},
                    {"schedule", r.spec.schedule},
                    {"residual", r.spec.residual},
                    {"ranks", r.spec.num_ranks},
                    {"stages", r.spec.num_stages},
                    {"microbatches", r.spec.num_microbatches},
                    {"ok", r.ok},
                    {"failure", r.failure},
                    {"tokens_per_s", r.metrics.tokens_per_s},
                    {"step_s", r.metrics.step_s},
                    {"loss", r.metrics.loss},
                    {"exposed_comm", r.metrics.exposed_comm},
                    {"peak_rss_mb", r.metrics.peak_rss_mb},
                    {"bubble_measured", r.trace.bubble},
                    {"bubble_simulated", r.model.simulated},
                    {"bubble_analytic", r.model.analytic},
                    {"cost_ms", {{"f", r.costs.f}, {"i", r.costs.i}, {"w", r.costs.w}}},
                    {"transfer_ms", r.trace.transfer_ms},
                    {"payload_bytes", r.payload_bytes}});
  }
  return {{"wall_s", out.wall_s}, {"runs", runs}};
}

}  // namespace

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

absl::Status RunStudy(const StudyOptions& o, std::ostream& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  StudyOutcome out;
  ASSIGN_OR_RETURN(out.config, LoadStudyConfig(o.config_path));
  ASSIGN_OR_RETURN(std::vector<RunSpec> specs, ExpandRuns(out.config));
  ASSIGN_OR_RETURN(Config first, ParseConfig(specs.front().job_yaml));
  out.tokens_per_microbatch = first.train.batch_size * first.model.seq_len;
  std::error_code ec;
  fs::create_directories(o.out_dir + "/traces", ec);
  if (ec) return absl::InternalError(absl::StrCat(o.out_dir, "/traces: ", ec.message()));
  for (size_t i = 0; i < specs.size(); ++i) {
    const double elapsed = Seconds(t0);
    const std::string eta = i == 0 ? "?" : Clock(elapsed / i * (specs.size() - i));
    progress << absl::StrFormat(
                    "[%zu/%zu] %s (%s, %d ranks, %d stages, M=%d)  elapsed %s  ETA %s\n", i + 1,
                    specs.size(), specs[i].id, specs[i].comparison, specs[i].num_ranks,
                    specs[i].num_stages, specs[i].num_microbatches, Clock(elapsed), eta)
             << std::flush;
    out.runs.push_back(ExecuteRun(o, out.config, specs[i]));
    const RunResult& r = out.runs.back();
    progress << (r.ok ? absl::StrFormat("      %.0f tok/s, step %.1f ms, %.1f s\n",
                                        r.metrics.tokens_per_s, r.metrics.step_s * 1e3, r.wall_s)
                      : absl::StrCat("      FAILED: ", r.failure, "\n"))
             << std::flush;
  }
  SimulateAtScale(out);
  out.wall_s = Seconds(t0);
  RETURN_IF_ERROR(WriteCharts(out, o.out_dir));
  RETURN_IF_ERROR(WriteFile(o.out_dir + "/results.json", ResultsJson(out).dump(1) + "\n"));
  RETURN_IF_ERROR(WriteFile(o.out_dir + "/report.md", RenderReport(out)));
  int failed = 0;
  for (const RunResult& r : out.runs) failed += r.ok ? 0 : 1;
  progress << absl::StrFormat("study done in %s: %zu runs (%d failed); report %s/report.md\n",
                              Clock(out.wall_s), out.runs.size(), failed, o.out_dir);
  return absl::OkStatus();
}

}  // namespace xhc::study
