// report.md sections on the models (analytic, simulated) against measurement, the simulated
// scale-out, the method; and the charts.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "runtime/lab/study/chart.h"
#include "runtime/lab/study/study.h"

namespace xhc::study {

std::string ModelAgreementSection(const StudyOutcome& o) {
  std::string t =
      "## Q4: do the analytic and simulated bubbles match the measured ones?\n\n"
      "| run | F ms | I ms | W ms | transfer ms (samples) | analytic | simulated | measured | "
      "measured - simulated | exposed comm meas. / sim. "
      "|\n|---|---|---|---|---|---|---|---|---|---|\n";
  double sum_ms = 0, sum_sa = 0, worst = -1;
  int n = 0, n_sa = 0, above = 0;
  const RunResult* worst_run = nullptr;
  for (const RunResult& r : o.runs) {
    if (!r.ok) continue;
    const double meas = Mean(r.trace.bubble), sim = Mean(r.model.simulated);
    const std::string analytic =
        r.model.analytic.empty() ? "n/a" : absl::StrFormat("%.3f", Mean(r.model.analytic));
    absl::StrAppendFormat(&t,
                          "| %s | %.2f | %.2f | %.2f | %.2f (%d) | %s | %.3f | %.3f | %+.3f | "
                          "%.3f / %.3f |\n",
                          r.spec.id, r.costs.f, r.costs.i, r.costs.w, r.trace.transfer_ms,
                          r.trace.transfer_samples, analytic, sim, meas, meas - sim,
                          Mean(r.metrics.exposed_comm), Mean(r.model.simulated_exposed));
    sum_ms += std::fabs(meas - sim);
    above += meas > sim ? 1 : 0;
    ++n;
    if (!r.model.analytic.empty()) sum_sa += std::fabs(sim - Mean(r.model.analytic)), ++n_sa;
    if (std::fabs(meas - sim) > worst) worst = std::fabs(meas - sim), worst_run = &r;
  }
  if (n == 0) return t + "\n**Findings.** No successful run.\n\n";
  absl::StrAppendFormat(
      &t,
      "\n**Findings.** Over %d runs the measured bubble differs from the simulated one by "
      "%.3f on average (absolute fraction), and is larger in %d of them; the largest gap is %s "
      "(measured %.3f vs simulated %.3f). The formula and the simulator differ by %.3f on average "
      "over %d runs with a published formula: the simulator adds the measured transfer time and "
      "the real I/W split, which the formula (free communication, uniform costs) leaves out. ",
      n, sum_ms / n, above, worst_run->spec.id, Mean(worst_run->trace.bubble),
      Mean(worst_run->model.simulated), n_sa ? sum_sa / n_sa : 0.0, n_sa);
  t += above * 2 > n
           ? "Measurement mostly sees more idle time than the simulator: per-action overheads "
             "(receive posting, gloo progress, span bookkeeping) and the workers' competition for "
             "the cores stretch the waits, and the simulator uses one mean cost per action kind "
             "while real stage costs vary (embedding and loss stages are unequal).\n\n"
           : "Measurement mostly sees less idle time than the simulator: compute spans stretch "
             "when workers share cores, so busy time grows relative to the window.\n\n";
  return t;
}

std::string ScaleSection(const StudyOutcome& o) {
  if (o.scaled.empty()) return "";
  std::string t =
      "## Q5: more ranks than cores (simulated with the measured per-stage costs)\n\n"
      "| residual | schedule | R | M | makespan ms | tokens/s (sim.) | bubble sim. | "
      "bubble analytic |\n|---|---|---|---|---|---|---|---|\n";
  std::map<std::pair<std::string, int>, const ScaledResult*> best;  // (residual, R) at max M
  int max_m_factor =
      *std::max_element(o.config.microbatch_factors.begin(), o.config.microbatch_factors.end());
  for (const ScaledResult& s : o.scaled) {
    absl::StrAppendFormat(&t, "| %s | %s | %d | %d | %.1f | %.0f | %.3f | %s |\n", s.residual,
                          s.schedule, s.num_ranks, s.num_microbatches, s.makespan_ms,
                          s.tokens_per_s, s.bubble_mean,
                          s.analytic_mean < 0 ? "n/a" : absl::StrFormat("%.3f", s.analytic_mean));
    if (s.num_microbatches != max_m_factor * s.num_ranks) continue;
    auto& b = best[{s.residual, s.num_ranks}];
    if (b == nullptr || s.bubble_mean < b->bubble_mean) b = &s;
  }
  std::vector<std::string> findings;
  for (const auto& [key, s] : best) {
    findings.push_back(
        absl::StrFormat("%s at R=%d (M=%d): %s has the smallest simulated bubble "
                        "(%.3f)",
                        key.first, key.second, s->num_microbatches, s->schedule, s->bubble_mean));
  }
  return absl::StrCat(t, "\n**Findings.** ", absl::StrJoin(findings, "; "),
                      ". Every stage keeps the cost measured on ", o.config.devices,
                      " ranks (the model deepens with the pipeline), so these rows isolate the "
                      "schedules' dependency structure from core contention.\n\n");
}

std::string MethodSection(const StudyOutcome& o) {
  const StudyConfig& c = o.config;
  return absl::StrFormat(
      "## Method\n\n"
      "- Each run is a real `xhc launch` (controller + worker processes, gRPC + gloo on "
      "loopback), %d steps of which the first %d are discarded as warm-up; tokens/s, step time, "
      "exposed comm (worker wait / step time) and loss come from `metrics.jsonl`, peak RSS is "
      "each worker's `ru_maxrss`.\n"
      "- **Measured bubble** (from `trace.json`): per kept step, the pipeline window runs from "
      "the first F/I/W span start on any rank to the last F/I/W end on any rank (the optimizer "
      "and grad-norm all-reduce are outside every schedule's model); a rank's bubble is "
      "1 - its F/I/W time / the window, summed over kept steps.\n"
      "- **Simulated bubble**: `scheduler::Simulate` on the same schedule with the run's "
      "measured mean F, I, W span durations (B = I + W, F&B = F + B: the CPU worker runs them "
      "one after the other) and the measured transfer time of one [tokens, N, C] float32 "
      "boundary (median of receive-end minus producer-end over receives that waited), "
      "expressed as a bandwidth.\n"
      "- **Analytic bubble**: the published formula (`scheduler::AnalyticBubble`) with the "
      "same costs and free communication, as a fraction of (bubble + the rank's compute).\n"
      "- **Two cores, several processes**: measured runs use at most %d worker ranks with "
      "%d OpenMP/OpenBLAS thread(s) each, so workers do not oversubscribe the cores (the "
      "controller thread is mostly idle). Larger rank counts are not measured but simulated "
      "(Q5) with the measured costs. Workers are not pinned to cores; the OS may still migrate "
      "them, which shows up as noise in short runs.\n"
      "- Equal device count: every schedule on %d ranks (DualPipeV then has 2x the stages). "
      "Equal stage count: PP = %d stages (DualPipeV on PP/2 ranks). M is the same for every "
      "schedule in a column: %s x PP.\n\n",
      c.steps, c.warmup_steps, std::max(c.devices, c.stages), c.threads_per_worker, c.devices,
      c.stages, absl::StrJoin(c.microbatch_factors, ", "));
}

absl::Status WriteCharts(const StudyOutcome& o, const std::string& out_dir) {
  const std::string dir = out_dir + "/charts";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": ", ec.message()));
  const StudyConfig& c = o.config;
  const int m =
      *std::max_element(c.microbatch_factors.begin(), c.microbatch_factors.end()) * c.stages;
  const std::string res = c.residuals.back();
  BarChart bubble{absl::StrCat("Bubble by schedule (", res, ", ", c.devices, " ranks, M=", m, ")"),
                  "bubble fraction",
                  c.schedules,
                  {"analytic", "simulated", "measured"},
                  std::vector<std::vector<double>>(3, std::vector<double>(c.schedules.size(), -1))};
  BarChart tput{
      absl::StrCat("Throughput by schedule and residual (", c.devices, " ranks, M=", m, ")"),
      "tokens/s", c.schedules, c.residuals,
      std::vector<std::vector<double>>(c.residuals.size(),
                                       std::vector<double>(c.schedules.size(), -1))};
  ScatterChart scatter{"Measured against simulated bubble (all runs)",
                       "simulated bubble",
                       "measured bubble",
                       c.residuals,
                       {},
                       true};
  scatter.points.resize(c.residuals.size());
  for (const RunResult& r : o.runs) {
    if (!r.ok) continue;
    const size_t k =
        std::find(c.schedules.begin(), c.schedules.end(), r.spec.schedule) - c.schedules.begin();
    const size_t s =
        std::find(c.residuals.begin(), c.residuals.end(), r.spec.residual) - c.residuals.begin();
    scatter.points[s].push_back({Mean(r.model.simulated), Mean(r.trace.bubble)});
    if (r.spec.comparison != "equal-devices" || r.spec.num_microbatches != m) continue;
    tput.values[s][k] = r.metrics.tokens_per_s;
    if (r.spec.residual != res) continue;
    bubble.values[0][k] = r.model.analytic.empty() ? -1 : Mean(r.model.analytic);
    bubble.values[1][k] = Mean(r.model.simulated);
    bubble.values[2][k] = Mean(r.trace.bubble);
  }
  if (absl::Status s = WriteChartFiles(bubble, dir + "/bubble_by_schedule"); !s.ok()) return s;
  if (absl::Status s = WriteChartFiles(tput, dir + "/throughput"); !s.ok()) return s;
  return WriteChartFiles(scatter, dir + "/measured_vs_simulated");
}

}  // namespace xhc::study
