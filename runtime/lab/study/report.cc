// report.md: tables per question, each followed by a paragraph computed from the numbers.
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "runtime/lab/study/study.h"

namespace xhc::study {
namespace {

std::string PerRank(const std::vector<double>& v) {
  if (v.empty()) return "n/a";
  std::vector<std::string> parts;
  for (double x : v) parts.push_back(absl::StrFormat("%.2f", x));
  return absl::StrJoin(parts, " / ");
}

double Max(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

std::vector<const RunResult*> Select(const StudyOutcome& o, const std::string& residual,
                                     int stages_or_devices, bool equal_stages, int m) {
  std::vector<const RunResult*> rows;
  for (const RunResult& r : o.runs) {
    const bool in_set = equal_stages ? r.spec.num_stages == stages_or_devices
                                     : r.spec.comparison == "equal-devices";
    if (in_set && r.ok && r.spec.residual == residual && r.spec.num_microbatches == m) {
      rows.push_back(&r);
    }
  }
  return rows;
}

std::vector<int> MicrobatchCounts(const StudyOutcome& o) {
  std::vector<int> ms;
  for (int f : o.config.microbatch_factors) ms.push_back(f * o.config.stages);
  return ms;
}

std::string MainTable(const StudyOutcome& o) {
  std::string t =
      "| run | comparison | schedule | residual | R | PP | M | tokens/s | step ms | "
      "bubble analytic | bubble simulated | bubble measured | exposed comm | peak RSS MB | "
      "loss | status |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RunResult& r : o.runs) {
    const RunSpec& s = r.spec;
    if (!r.ok) {
      absl::StrAppendFormat(&t,
                            "| %s | %s | %s | %s | %d | %d | %d | - | - | - | - | - | - | - "
                            "| - | FAILED |\n",
                            s.id, s.comparison, s.schedule, s.residual, s.num_ranks, s.num_stages,
                            s.num_microbatches);
      continue;
    }
    absl::StrAppendFormat(
        &t,
        "| %s | %s | %s | %s | %d | %d | %d | %.0f | %.1f | %s | %s | %s | %s | %s | %.4f "
        "| ok |\n",
        s.id, s.comparison, s.schedule, s.residual, s.num_ranks, s.num_stages, s.num_microbatches,
        r.metrics.tokens_per_s, r.metrics.step_s * 1e3, PerRank(r.model.analytic),
        PerRank(r.model.simulated), PerRank(r.trace.bubble), PerRank(r.metrics.exposed_comm),
        PerRank(r.metrics.peak_rss_mb), r.metrics.loss);
  }
  return t;
}

// Throughput table of one comparison (rows: schedule; columns: residual x M) + findings.
std::string ThroughputSection(const StudyOutcome& o, bool equal_stages) {
  const StudyConfig& c = o.config;
  const int key = equal_stages ? c.stages : c.devices;
  std::string t = "| schedule (R, PP) |";
  std::string sep = "|---|";
  for (const std::string& res : c.residuals) {
    for (int m : MicrobatchCounts(o)) {
      absl::StrAppend(&t, " ", res, " M=", m, " tok/s (meas. bubble) |");
      sep += "---|";
    }
  }
  t += "\n" + sep + "\n";
  std::vector<std::string> findings;
  for (const std::string& sched : c.schedules) {
    std::string row, label;
    for (const std::string& res : c.residuals) {
      for (int m : MicrobatchCounts(o)) {
        const RunResult* hit = nullptr;
        for (const RunResult* r : Select(o, res, key, equal_stages, m)) {
          if (r->spec.schedule == sched) hit = r;
        }
        if (hit == nullptr) {
          row += " - |";
          continue;
        }
        label =
            absl::StrFormat("%s (R=%d, PP=%d)", sched, hit->spec.num_ranks, hit->spec.num_stages);
        absl::StrAppendFormat(&row, " %.0f (%.2f) |", hit->metrics.tokens_per_s,
                              Mean(hit->trace.bubble));
      }
    }
    absl::StrAppend(&t, "| ", label.empty() ? sched : label, " |", row, "\n");
  }
  for (const std::string& res : c.residuals) {
    for (int m : MicrobatchCounts(o)) {
      auto rows = Select(o, res, key, equal_stages, m);
      if (rows.size() < 2) continue;
      auto by_tps = [](const RunResult* a, const RunResult* b) {
        return a->metrics.tokens_per_s < b->metrics.tokens_per_s;
      };
      auto by_sim = [](const RunResult* a, const RunResult* b) {
        return Mean(a->model.simulated) < Mean(b->model.simulated);
      };
      const RunResult* best = *std::max_element(rows.begin(), rows.end(), by_tps);
      const RunResult* worst = *std::min_element(rows.begin(), rows.end(), by_tps);
      const RunResult* sim_best = *std::min_element(rows.begin(), rows.end(), by_sim);
      findings.push_back(absl::StrFormat(
          "%s, M=%d: %s is fastest at %.0f tok/s, %.2fx the slowest (%s, %.0f tok/s); the "
          "simulator's smallest bubble is %s (%.2f)%s",
          res, m, best->spec.schedule, best->metrics.tokens_per_s,
          best->metrics.tokens_per_s / std::max(worst->metrics.tokens_per_s, 1e-9),
          worst->spec.schedule, worst->metrics.tokens_per_s, sim_best->spec.schedule,
          Mean(sim_best->model.simulated),
          sim_best == best ? ", the same schedule" : ", not the measured winner"));
    }
  }
  return absl::StrCat(t, "\n**Findings.** ",
                      findings.empty() ? "Too few successful runs to compare."
                                       : absl::StrJoin(findings, "; ") + ".",
                      "\n\n");
}

std::string ResidualSection(const StudyOutcome& o) {
  std::string t =
      "| residual | N | payload KiB/boundary | mean tok/s | vs vanilla | "
      "mean peak RSS MB (max rank) | mean measured bubble |\n|---|---|---|---|---|---|---|\n";
  std::map<std::string, double> tps, rss, bubble, payload;
  std::map<std::string, int> count;
  for (const RunResult& r : o.runs) {
    if (!r.ok || r.spec.comparison != "equal-devices") continue;
    tps[r.spec.residual] += r.metrics.tokens_per_s;
    rss[r.spec.residual] += Max(r.metrics.peak_rss_mb);
    bubble[r.spec.residual] += Mean(r.trace.bubble);
    payload[r.spec.residual] = r.payload_bytes;
    ++count[r.spec.residual];
  }
  const std::map<std::string, int> streams = {
      {"vanilla", 1}, {"hc", 4}, {"mhc", 4}, {"xhc", 16}, {"xhc_flash", 16}};
  const double base = count["vanilla"] > 0 ? tps["vanilla"] / count["vanilla"] : 0;
  std::vector<std::string> findings;
  for (const std::string& res : o.config.residuals) {
    if (count[res] == 0) continue;
    const double n = count[res], mean_tps = tps[res] / n;
    const std::string ratio = base > 0 ? absl::StrFormat("%.2fx", mean_tps / base) : "n/a";
    absl::StrAppendFormat(&t, "| %s | %d | %.1f | %.0f | %s | %.1f | %.2f |\n", res,
                          streams.at(res), payload[res] / 1024, mean_tps, ratio, rss[res] / n,
                          bubble[res] / n);
    if (res != "vanilla" && base > 0) {
      findings.push_back(absl::StrFormat(
          "%s (N=%d) runs at %.0f%% of vanilla's throughput on average over all schedules, moves "
          "%.0fx the bytes per stage boundary and peaks at %+.1f MB RSS per rank",
          res, streams.at(res), 100 * mean_tps / base,
          payload[res] / std::max(payload["vanilla"], 1.0),
          rss[res] / n - rss["vanilla"] / std::max(count["vanilla"], 1)));
    }
  }
  return absl::StrCat(t, "\n**Findings.** ",
                      findings.empty() ? "No vanilla baseline ran, so no ratio is given."
                                       : absl::StrJoin(findings, "; ") + ".",
                      "\n\n");
}

}  // namespace

std::string ModelAgreementSection(const StudyOutcome& o);
std::string ScaleSection(const StudyOutcome& o);
std::string MethodSection(const StudyOutcome& o);

std::string RenderReport(const StudyOutcome& o) {
  std::string md = "# Pipeline overlap throughput study\n\n";
  int failed = 0;
  for (const RunResult& r : o.runs) failed += r.ok ? 0 : 1;
  absl::StrAppendFormat(&md,
                        "%zu runs (%d failed), total wall time %.0f s. Charts in "
                        "`charts/` (PNG, SVG, PDF), Chrome traces of every run in `traces/`, "
                        "raw numbers in `results.json`.\n\n",
                        o.runs.size(), failed, o.wall_s);
  md +=
      "## All runs\n\nPer-rank values are listed rank 0 / rank 1 / ...; bubbles are fractions "
      "of the pipeline window (see Method).\n\n" +
      MainTable(o) + "\n";
  md += absl::StrFormat("## Q1: which schedule is fastest at equal device count (%d ranks)?\n\n",
                        o.config.devices) +
        ThroughputSection(o, false);
  md += absl::StrFormat("## Q2: which schedule is fastest at equal stage count (PP = %d)?\n\n",
                        o.config.stages) +
        ThroughputSection(o, true);
  md += "## Q3: what does the residual state cost (vanilla N=1, mhc N=4, xhc N=16)?\n\n" +
        ResidualSection(o);
  md += ModelAgreementSection(o) + ScaleSection(o) + MethodSection(o);
  if (failed > 0) {
    md += "## Failed runs\n\n";
    for (const RunResult& r : o.runs) {
      if (!r.ok) md += absl::StrCat("### ", r.spec.id, "\n\n```\n", r.failure, "\n```\n\n");
    }
  }
  return md;
}

}  // namespace xhc::study
