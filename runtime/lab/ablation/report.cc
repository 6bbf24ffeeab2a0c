// report.md and the learning-curve charts of an ablation study. Every sentence of the
// findings is chosen from the measured numbers (which ordering holds, which difference is
// inside the seed spread), never written in advance.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "runtime/lab/ablation/ablation.h"
#include "runtime/lab/study/chart.h"

namespace xhc::ablation {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct MeanStd {
  double mean = kNaN, std = kNaN;
  int n = 0;
};

MeanStd Summarize(const std::vector<double>& v) {
  MeanStd s;
  std::vector<double> x;
  for (double d : v) {
    if (std::isfinite(d)) x.push_back(d);
  }
  s.n = static_cast<int>(x.size());
  if (x.empty()) return s;
  double sum = 0;
  for (double d : x) sum += d;
  s.mean = sum / x.size();
  if (x.size() > 1) {
    double ss = 0;
    for (double d : x) ss += (d - s.mean) * (d - s.mean);
    s.std = std::sqrt(ss / (x.size() - 1));  // sample standard deviation over seeds
  }
  return s;
}

std::string Fmt(const MeanStd& s) {
  if (s.n == 0) return "n/a";
  if (!std::isfinite(s.std)) return absl::StrFormat("%.4f (1 seed)", s.mean);
  return absl::StrFormat("%.4f ± %.4f", s.mean, s.std);
}

std::string Num(double x, const absl::FormatSpec<double>& f) {
  return std::isfinite(x) ? absl::StrFormat(f, x) : "n/a";
}

// A multi-line failure (exit code + log tail) as one indented markdown list item.
std::string ListItem(const std::string& head, const std::string& text) {
  return absl::StrCat("- ", head, ": ", absl::StrReplaceAll(text, {{"\n", "\n  "}}), "\n");
}

struct Variant {
  std::string name;
  std::vector<const RunResult*> ok;
  int failed = 0;
  MeanStd steps, flops, wall;           // validation loss at the three equal budgets
  std::map<int, double> final_by_seed;  // for comparisons paired by seed
  FlopCount per_token;
  double tokens_per_s = 0, wall_s = 0;
};

struct Summary {
  std::vector<Variant> variants;
  double flop_budget = 0, second_budget = 0;
  int steps = 0;
  const Variant* Find(const std::string& name) const {
    for (const Variant& v : variants) {
      if (v.name == name && v.steps.n > 0) return &v;
    }
    return nullptr;
  }
};

Summary Summarize(const AblationOutcome& o) {
  Summary s;
  s.steps = o.config.steps;
  double flop_budget = std::numeric_limits<double>::infinity(), sec_budget = flop_budget;
  for (const std::string& name : o.config.variants) {
    Variant v;
    v.name = name;
    for (const RunResult& r : o.runs) {
      if (r.variant != name) continue;
      v.per_token = r.flops;  // from the config: known for a failed run too
      if (!r.ok) {
        ++v.failed;
        continue;
      }
      v.ok.push_back(&r);
      v.per_token = r.flops;
      flop_budget = std::min(flop_budget, r.steps * r.tokens_per_step * r.flops.training());
      sec_budget = std::min(sec_budget, r.train_s);
    }
    s.variants.push_back(v);
  }
  s.flop_budget = std::isfinite(flop_budget) ? flop_budget : 0;
  s.second_budget = std::isfinite(sec_budget) ? sec_budget : 0;
  for (Variant& v : s.variants) {
    std::vector<double> a, b, c, tps, wall;
    for (const RunResult* r : v.ok) {
      v.final_by_seed[r->seed] = r->final_val_loss();
      a.push_back(r->final_val_loss());
      b.push_back(LossAt(*r, Axis::kFlops, s.flop_budget));
      c.push_back(LossAt(*r, Axis::kSeconds, s.second_budget));
      tps.push_back(r->tokens_per_s);
      wall.push_back(r->wall_s);
    }
    v.steps = Summarize(a);
    v.flops = Summarize(b);
    v.wall = Summarize(c);
    v.tokens_per_s = Summarize(tps).mean;
    v.wall_s = Summarize(wall).mean;
  }
  return s;
}

// a − b per seed both ran: every variant of a seed shares its data order and validation
// windows, so the seed-to-seed part of the spread that both share cancels here.
MeanStd Paired(const Variant& a, const Variant& b) {
  std::vector<double> d;
  for (const auto& [seed, loss] : a.final_by_seed) {
    if (auto it = b.final_by_seed.find(seed); it != b.final_by_seed.end())
      d.push_back(loss - it->second);
  }
  return Summarize(d);
}

// Paired by seed: resolved when the mean difference exceeds twice its standard error (a rough
// criterion, not a significance test at 3 seeds).
bool PairedResolved(const Variant& a, const Variant& b) {
  const MeanStd p = Paired(a, b);
  return p.n >= 2 && std::isfinite(p.std) && std::abs(p.mean) > 2 * p.std / std::sqrt(p.n);
}

std::string PairedText(const Variant& a, const Variant& b) {
  const MeanStd p = Paired(a, b);
  if (p.n < 2) return "";
  return absl::StrFormat("; paired by seed %+.4f ± %.4f over %d seeds, %s", p.mean, p.std, p.n,
                         PairedResolved(a, b) ? "more than twice its standard error"
                                              : "within twice its standard error");
}

// "0.0123 lower", with whether it stands out of the seed spread: a difference counts as
// resolved when it exceeds twice the larger of the two standard deviations.
std::string Compare(const Variant& a, const Variant& b) {
  const double d = a.steps.mean - b.steps.mean;
  const double spread = std::max(a.steps.std, b.steps.std);
  std::string where;
  if (!std::isfinite(spread)) {
    where = "one seed: the seed spread is unknown";
  } else if (std::abs(d) > 2 * spread) {
    where = absl::StrFormat("more than twice the larger seed standard deviation, %.4f", spread);
  } else {
    where = absl::StrFormat("within twice the larger seed standard deviation, %.4f", spread);
  }
  return absl::StrFormat("%s %.4f vs %s %.4f (%s by %.4f; %s%s)", a.name, a.steps.mean, b.name,
                         b.steps.mean,
                         d < 0   ? "lower"
                         : d > 0 ? "higher"
                                 : "equal",
                         std::abs(d), where, PairedText(a, b));
}

bool UnpairedResolved(const Variant& a, const Variant& b) {
  const double spread = std::max(a.steps.std, b.steps.std);
  return std::isfinite(spread) && std::abs(a.steps.mean - b.steps.mean) > 2 * spread;
}

// What the findings' sentences go by: the paired criterion where two or more seeds pair up
// (it removes the spread the variants of a seed share), else the unpaired one.
bool Resolved(const Variant& a, const Variant& b) {
  return Paired(a, b).n >= 2 ? PairedResolved(a, b) : UnpairedResolved(a, b);
}

std::string OrderingParagraph(const Summary& s) {
  const Variant *x = s.Find("xhc"), *m = s.Find("mhc4"), *v = s.Find("vanilla");
  const Variant* m16 = s.Find("mhc16");
  if (!x || !m || !v) {
    return "Not answerable from this study: it needs xhc, mhc4 and vanilla results.";
  }
  const bool xm = x->steps.mean <= m->steps.mean, mv = m->steps.mean < v->steps.mean;
  std::string text =
      absl::StrFormat("At equal steps the paper's ordering xhc ≤ mhc < vanilla %s here: %s; %s.",
                      xm && mv ? "holds" : "does not hold", Compare(*x, *m), Compare(*m, *v));
  if (xm && mv && !(Resolved(*x, *m) && Resolved(*m, *v))) {
    absl::StrAppend(&text,
                    " The ordering is in the means, but not every step of it is "
                    "resolved by these seeds (paired by seed where they pair up).");
  }
  if (m16) absl::StrAppend(&text, " With N = 16 streams, mhc gives: ", Compare(*m16, *x), ".");
  const std::vector<std::string> budgets = {"equal FLOPs", "equal wall-clock"};
  for (int k = 0; k < 2; ++k) {
    const MeanStd& a = k == 0 ? x->flops : x->wall;
    const MeanStd& b = k == 0 ? m->flops : m->wall;
    const MeanStd& c = k == 0 ? v->flops : v->wall;
    if (a.n == 0 || b.n == 0 || c.n == 0) {
      absl::StrAppend(&text, " At ", budgets[k],
                      " the comparison is incomplete (a variant's "
                      "curve does not reach back to the budget: n/a in the table).");
      continue;
    }
    absl::StrAppend(
        &text, absl::StrFormat(" At %s: xhc %.4f, mhc4 %.4f, vanilla %.4f (the ordering %s).",
                               budgets[k], a.mean, b.mean, c.mean,
                               a.mean <= b.mean && b.mean < c.mean ? "holds" : "does not hold"));
  }
  return text;
}

std::string ConvParagraph(const Summary& s) {
  const Variant *x = s.Find("xhc"), *m = s.Find("mhc4"), *mc = s.Find("mhc4_conv");
  if (!x || !m || !mc) return "Not answerable from this study: it needs xhc, mhc4 and mhc4_conv.";
  const double gain = m->steps.mean - x->steps.mean, conv = m->steps.mean - mc->steps.mean;
  std::string text = absl::StrFormat(
      "xhc's gain over mhc4 at equal steps is %.4f; adding the convolutions to mhc4 changes its "
      "loss by %.4f (%s). ",
      gain, -conv, Compare(*mc, *m));
  if (gain <= 0) {
    absl::StrAppend(&text, "xhc does not beat mhc4 here, so there is no gain to apportion.");
  } else {
    absl::StrAppend(
        &text,
        absl::StrFormat("mhc4 + conv therefore recovers %.0f%% of xhc's gain%s.", 100 * conv / gain,
                        Resolved(*m, *x)
                            ? ""
                            : " (a share of a gap that the seeds do not resolve: read it as "
                              "noise-level)"));
  }
  return text;
}

std::string FlashParagraph(const Summary& s) {
  const Variant* x = s.Find("xhc");
  if (!x) return "Not answerable from this study: it needs xhc.";
  std::vector<std::string> parts;
  for (const char* name : {"xhc_flash2", "xhc_flash4"}) {
    const Variant* f = s.Find(name);
    if (!f) continue;
    parts.push_back(absl::StrCat(Compare(*f, *x), Resolved(*f, *x) ? ": it does not match xhc"
                                                                   : ": it matches xhc within "
                                                                     "the seed spread"));
  }
  if (parts.empty()) return "Not answerable from this study: it needs an xhc_flash variant.";
  return absl::StrCat("At equal steps, ", absl::StrJoin(parts, "; "), ".");
}

std::string CostParagraph(const Summary& s) {
  const Variant* v = s.Find("vanilla");
  if (!v) return "Not answerable from this study: it needs vanilla as the reference.";
  std::vector<std::string> parts, slower, faster;
  for (const Variant& o : s.variants) {
    if (o.steps.n == 0 || o.name == "vanilla") continue;
    const double flop_ratio = o.per_token.training() / v->per_token.training();
    const double time_ratio = v->tokens_per_s / o.tokens_per_s;
    parts.push_back(absl::StrFormat("%s %.2f× the FLOPs and %.2f× the time per token", o.name,
                                    flop_ratio, time_ratio));
    (time_ratio > flop_ratio ? slower : faster).push_back(o.name);
  }
  std::string text = absl::StrCat(
      "Relative to vanilla on this machine (training step time only, measured while other "
      "sessions shared the 2 cores): ",
      absl::StrJoin(parts, "; "), ".");
  if (!slower.empty()) {
    absl::StrAppend(&text, " ", absl::StrJoin(slower, ", "),
                    " cost more in time than in FLOPs: their residual maps run below the "
                    "backbone's arithmetic rate.");
  }
  if (!faster.empty()) {
    absl::StrAppend(&text, " ", absl::StrJoin(faster, ", "),
                    " cost less in time than in FLOPs (the FLOP count includes work that "
                    "runs faster than vanilla's own per-FLOP rate).");
  }
  return text;
}

std::string SpreadParagraph(const Summary& s) {
  std::vector<double> stds;
  for (const Variant& v : s.variants) {
    if (std::isfinite(v.steps.std)) stds.push_back(v.steps.std);
  }
  int pairs = 0, resolved = 0, paired = 0;
  double smallest = kNaN, largest = kNaN;
  for (size_t i = 0; i < s.variants.size(); ++i) {
    for (size_t j = i + 1; j < s.variants.size(); ++j) {
      const Variant &a = s.variants[i], &b = s.variants[j];
      if (a.steps.n == 0 || b.steps.n == 0) continue;
      ++pairs;
      resolved += UnpairedResolved(a, b) ? 1 : 0;
      paired += PairedResolved(a, b) ? 1 : 0;
      const double d = std::abs(a.steps.mean - b.steps.mean);
      smallest = std::isfinite(smallest) ? std::min(smallest, d) : d;
      largest = std::isfinite(largest) ? std::max(largest, d) : d;
    }
  }
  if (stds.empty()) {
    return "Each variant ran one seed: the seed spread is unknown, so no difference in these "
           "tables can be told apart from noise. Run more seeds before reading them.";
  }
  const MeanStd spread = Summarize(stds);
  return absl::StrFormat(
      "The seed standard deviation of the final validation loss is %.4f on average over the "
      "variants; the differences between variant means range from %.4f to %.4f, and %d of "
      "the %d pairs differ by more than twice the larger of their two standard deviations. "
      "Much of that spread is shared by all variants of a seed (its data order and validation "
      "windows): paired by seed, %d of the %d pairs differ by more than twice the standard "
      "error of their per-seed differences (a rough criterion, not a significance test). "
      "This is a %d-step study of a small model on a small corpus: it can show which "
      "differences stand out of its own seed noise at this scale, not the paper's 10B-scale "
      "gaps (0.02–0.05 in loss), and an ordering it does not resolve is not evidence "
      "against the paper's.",
      spread.mean, smallest, largest, resolved, pairs, paired, pairs, s.steps);
}

}  // namespace

namespace {

// The validation-loss table: at equal steps, FLOPs and wall-clock, with each variant's cost.
void AppendLossTable(const Summary& s, std::string* out) {
  std::string& md = *out;
  absl::StrAppend(&md, "## Validation loss (mean ± standard deviation over seeds)\n\n");
  absl::StrAppend(
      &md,
      absl::StrFormat(
          "Equal FLOPs: at %.4g training FLOPs (the smallest total of any run); equal wall-clock: "
          "at %.1f s of training steps (the shortest run's). Values between validation points are "
          "interpolated linearly; n/a: the budget falls before the variant's first validation "
          "point.\n\n",
          s.flop_budget, s.second_budget));
  absl::StrAppend(&md,
                  "| variant | seeds ok | equal steps | equal FLOPs | equal wall-clock | "
                  "train FLOPs/token (backbone + residual) | tokens/s | wall s/run |\n"
                  "|---|---|---|---|---|---|---|---|\n");
  for (const Variant& v : s.variants) {
    absl::StrAppend(
        &md,
        absl::StrFormat("| %s | %d/%d | %s | %s | %s | %.3g (%.3g + %.3g) | %s | %s |\n", v.name,
                        static_cast<int>(v.ok.size()), static_cast<int>(v.ok.size()) + v.failed,
                        Fmt(v.steps), Fmt(v.flops), Fmt(v.wall), v.per_token.training(),
                        3 * v.per_token.backbone, 3 * v.per_token.residual,
                        Num(v.tokens_per_s, "%.0f"), Num(v.wall_s, "%.1f")));
  }
}

// The stability diagnostics table from each run's final checkpoint.
void AppendDiagnosticsTable(const Summary& s, std::string* out) {
  std::string& md = *out;
  absl::StrAppend(&md,
                  "\n## Stability diagnostics (final checkpoint, `xhc eval --diagnostics`)\n\n"
                  "Composite residual map over all sublayers, per token, on the first "
                  "diagnostics_batch validation rows; max over tokens and seeds, mean over "
                  "tokens and seeds.\n\n"
                  "| variant | forward gain max | forward gain mean | backward gain max | "
                  "backward gain mean | self-share | residual grad norm | router load "
                  "(min–max per stream) |\n|---|---|---|---|---|---|---|---|\n");
  for (const Variant& v : s.variants) {
    double fmax = 0, bmax = 0;
    std::vector<double> fmean, bmean, self, gnorm, lmin, lmax;
    for (const RunResult* r : v.ok) {
      if (!r->has_diagnostics) continue;
      const MixingStats& f = r->diagnostics.final();
      fmax = std::max(fmax, f.forward_max);
      bmax = std::max(bmax, f.backward_max);
      fmean.push_back(f.forward_mean);
      bmean.push_back(f.backward_mean);
      self.push_back(f.self_share);
      double g = 0;
      for (const auto& [name, norm] : r->diagnostics.grad_norms) g += norm * norm;
      gnorm.push_back(std::sqrt(g));
      if (!r->diagnostics.router_load.empty()) {
        lmin.push_back(*std::min_element(r->diagnostics.router_load.begin(),
                                         r->diagnostics.router_load.end()));
        lmax.push_back(*std::max_element(r->diagnostics.router_load.begin(),
                                         r->diagnostics.router_load.end()));
      }
    }
    if (fmean.empty()) {
      absl::StrAppend(&md, "| ", v.name, " | n/a | | | | | | |\n");
      continue;
    }
    absl::StrAppend(
        &md, absl::StrFormat("| %s | %.4f | %.4f | %.4f | %.4f | %.4f | %.4g | %s |\n", v.name,
                             fmax, Summarize(fmean).mean, bmax, Summarize(bmean).mean,
                             Summarize(self).mean, Summarize(gnorm).mean,
                             lmin.empty() ? "—"
                                          : absl::StrFormat("%.3f–%.3f", Summarize(lmin).mean,
                                                            Summarize(lmax).mean)));
  }
  absl::StrAppend(&md,
                  "\nPer-group gradient norms, gains after every sublayer and the full "
                  "router load are in `results/<run>.json`.\n");
}

// The findings: one paragraph per question the ablation asks.
void AppendFindings(const Summary& s, std::string* out) {
  std::string& md = *out;
  absl::StrAppend(&md, "\n## Findings\n\n");
  absl::StrAppend(&md, "**Does xhc ≤ mhc < vanilla hold here?** ", OrderingParagraph(s), "\n\n");
  absl::StrAppend(&md, "**How much of xhc's gain does mhc + conv recover?** ", ConvParagraph(s),
                  "\n\n");
  absl::StrAppend(&md, "**Does xhc_flash match xhc?** ", FlashParagraph(s), "\n\n");
  absl::StrAppend(&md, "**What does each variant cost in wall-clock?** ", CostParagraph(s), "\n\n");
  absl::StrAppend(&md, "**What this scale can and cannot show.** ", SpreadParagraph(s), "\n\n");
}

}  // namespace

std::string RenderAblationReport(const AblationOutcome& o) {
  const Summary s = Summarize(o);
  std::string md = "# Residual-variant ablation\n\n";
  if (o.pending > 0) {
    absl::StrAppend(&md, absl::StrFormat("**Partial report: %d run(s) not finished yet.** The "
                                         "tables cover the runs that have finished.\n\n",
                                         o.pending));
  }
  absl::StrAppend(
      &md,
      absl::StrFormat(
          "%zu variants × %zu seeds, %d steps each, %d run(s) at a time with %d thread(s) each. "
          "Every variant of a seed trains on the same batches in the same order and is validated "
          "on the same held-out windows (train.seed sets initialisation, data order and the "
          "validation windows); the recipe (optimizer, schedule, batch) is the same for all. "
          "This invocation took %.0f s (%d run(s) reused from an earlier one). The machine was "
          "shared with other sessions: wall-clock numbers include their interference.\n\n",
          o.config.variants.size(), o.config.seeds.size(), o.config.steps, o.config.parallel_runs,
          o.config.threads_per_run, o.wall_s, o.skipped));
  AppendLossTable(s, &md);
  AppendDiagnosticsTable(s, &md);
  AppendFindings(s, &md);
  std::string failures;
  for (const RunResult& r : o.runs) {
    if (!r.ok) absl::StrAppend(&failures, ListItem(r.id, r.failure));
    if (r.ok && !r.diagnostics_failure.empty()) {
      absl::StrAppend(&failures,
                      ListItem(absl::StrCat(r.id, " (diagnostics)"), r.diagnostics_failure));
    }
  }
  if (!failures.empty()) absl::StrAppend(&md, "## Failed runs\n\n", failures, "\n");
  absl::StrAppend(&md,
                  "## Charts\n\nMean validation loss over seeds against steps, training "
                  "FLOPs and training seconds: `charts/curves_steps`, `charts/curves_flops`, "
                  "`charts/curves_seconds` (.png, .svg, .pdf).\n\n"
                  "![steps](charts/curves_steps.png)\n![flops](charts/curves_flops.png)\n"
                  "![seconds](charts/curves_seconds.png)\n\n");
  absl::StrAppend(&md, "## FLOP count\n\n", FlopFormula());
  return md;
}

absl::Status WriteAblationCharts(const AblationOutcome& o, const std::string& out_dir) {
  struct Kind {
    Axis axis;
    const char *file, *x_label;
    double scale;
  };
  const Kind kinds[] = {{Axis::kSteps, "curves_steps", "step", 1},
                        {Axis::kFlops, "curves_flops", "training FLOPs (×1e12)", 1e-12},
                        {Axis::kSeconds, "curves_seconds", "training seconds", 1}};
  for (const Kind& k : kinds) {
    study::ScatterChart chart;
    chart.title = absl::StrCat("Validation loss (mean over seeds) vs ", k.x_label);
    chart.x_label = k.x_label;
    chart.y_label = "validation loss";
    chart.diagonal = false;
    chart.connect = true;
    for (const std::string& name : o.config.variants) {
      std::vector<const RunResult*> ok;
      for (const RunResult& r : o.runs) {
        if (r.variant == name && r.ok) ok.push_back(&r);
      }
      if (ok.empty()) continue;
      std::vector<std::pair<double, double>> pts;
      for (size_t i = 0; i < ok.front()->curve.size(); ++i) {
        double x = 0, y = 0;
        int n = 0;
        for (const RunResult* r : ok) {
          if (i >= r->curve.size()) continue;
          x += AxisValue(*r, r->curve[i], k.axis);
          y += r->curve[i].val_loss;
          ++n;
        }
        pts.push_back({k.scale * x / n, y / n});
      }
      chart.series.push_back(name);
      chart.points.push_back(pts);
    }
    if (chart.series.empty()) continue;
    absl::Status s = study::WriteChartFiles(chart, absl::StrCat(out_dir, "/charts/", k.file));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace xhc::ablation
