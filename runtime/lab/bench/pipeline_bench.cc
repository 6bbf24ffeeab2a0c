// Pipeline efficiency and exposed communication per schedule at R = 2 against the one-rank
// run, in one run on this machine, as real `xhc launch` jobs (processes, gRPC, gloo):
//   efficiency = tokens/s at R ranks / (R * tokens/s of one rank holding all stages),
// every process with the same OpenMP threads (1: R ranks x 1 thread <= the 2 cores here),
// next to the target 0.9 * (1 - simulated bubble), the bubble from the dependency simulator
// fed this run's measured stage costs (runtime/lab/study/bubbles.h). The one-rank reference is
// run again right before each schedule (each schedule's row has its own; the top-level
// figure is their mean). With --repeats K each schedule runs K such pairs in turn and its
// figures are the medians over the pairs (every pair's efficiency is printed too): on a
// shared VM one pair moves by +-0.05, as much as the schedules differ. Prints one JSON
// object. Where the efficiency goes, from the runs' traces: busy_fraction, the share of the
// R = 2 step the ranks spent in F/I/W compute (the rest: bubbles, waits, transfers, the
// optimizer: the schedule and the runtime), and compute_vs_one_rank, the ranks' compute
// together over the one-rank run's for the same work (above 1: the same kernels ran slower
// side by side, shared memory bandwidth, the machine's drift between the two runs, or the
// cores' time taken by other threads); efficiency = busy_fraction / compute_vs_one_rank x the
// one-rank step over its compute (~1). other_cpu (per rank, from metrics.jsonl): the CPU time
// of each rank's threads besides the compute over its step (the transport's, gRPC's), which
// with ranks x threads = cores comes out of the compute's time.
// The side-by-side reference (--side_by_side 1, the default) tells the two apart: two one-rank
// runs at once, each with 1 thread, load the machine as the R = 2 run does (both cores, their
// shared L3 and memory), so efficiency_vs_side_by_side = tokens/s at R / (R * tokens/s of one
// of them) is what is left to the schedule and the runtime, and compute_vs_side_by_side
// should be ~1. The efficiency and target stay the ones above; this is a diagnosis.
//
//   bazel run //runtime/lab/bench:pipeline_bench -- [--residual xhc] [--steps 14] [--warmup 4]
//                                               [--repeats 1] [--side_by_side 1]
//                                               [--schedules 1f1b,zb1p,dualpipe,dualpipev]
//                                               [--out /tmp/xhc-pipeline-bench]
// --schedules runs a subset (in the order given), e.g. one schedule's A/B of a change.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/cpu_info.h"
#include "base/file_read.h"
#include "base/median.h"
#include "runtime/common/config.h"
#include "runtime/lab/study/bubbles.h"
#include "runtime/lab/study/measure.h"
#include "runtime/lab/study/runner.h"
#include "scheduler/simulator.h"

namespace xhc {
namespace {
namespace fs = std::filesystem;

// The schedules the targets name, in the order the bench runs them by default.
const std::vector<std::string> kSchedules = {"1f1b", "zb1p", "dualpipe", "dualpipev"};

struct Options {
  std::string residual = "xhc", out = "/tmp/xhc-pipeline-bench";
  int steps = 14, warmup = 4, repeats = 1;
  bool side_by_side = true;  // also two one-rank references at once (above)
  std::vector<std::string> schedules = kSchedules;
};

// runtime/lab/bench/peer/small.yaml's model (the quickstart's width at 8 layers; 8
// micro-batches of 4 x 128 tokens), so its figures compare with the peer benchmark's and
// those in docs/design/.
std::string JobYaml(const Options& o, const std::string& schedule, int workers) {
  return absl::StrCat(
      "model: {d_model: 128, n_layers: 8, n_heads: 4, n_kv_heads: 2, seq_len: 128,\n"
      "        residual: {type: ",
      o.residual,
      "}}\n"
      "optim: {lr: 0.004, warmup_steps: 2}\n"
      "train: {steps: ",
      o.steps,
      ", batch_size: 4, microbatches: 8, seed: 1234, eval_every: 0}\n"
      "data: {train: /usr/share/games/fortunes/*}\n"
      "pipeline: {schedule: ",
      schedule, ", workers: ", workers,
      "}\n"
      "checkpoint: {every: 0, keep: 1}\n");
}

struct Measured {
  bool ok = false;
  std::string error;
  study::StepMetrics metrics;
  study::TraceMeasurement trace;
  study::ModelBubbles model;
};

// The run's directory (`tag`, or schedule_workers by default), with its config written.
std::string PrepareRun(const Options& o, const std::string& schedule, int workers,
                       const std::string& tag) {
  const std::string dir =
      absl::StrCat(o.out, "/", tag.empty() ? absl::StrCat(schedule, "_", workers) : tag);
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir + "/config.yaml") << JobYaml(o, schedule, workers);
  return dir;
}

study::ChildCommand LaunchCommand(const std::string& xhc, const std::string& dir) {
  return {{xhc, "launch", "--config", dir + "/config.yaml", "--out", dir + "/run"},
          {{"OMP_NUM_THREADS", "1"}},
          dir + "/log.txt"};
}

// What a finished run in `dir` measured: its steps, its trace, and the simulated bubble of
// its schedule from its own stage costs.
Measured Measure(const Options& o, const std::string& schedule, int workers, const std::string& dir,
                 const study::ChildResult& child) {
  Measured m;
  if (child.exit_code != 0) {
    const std::string why =
        child.error.empty() ? study::TailLines(dir + "/log.txt", 3) : child.error;
    m.error =
        absl::StrCat("exit ", child.exit_code, child.timed_out ? " (timed out)" : "", ": ", why);
    return m;
  }
  absl::StatusOr<study::StepMetrics> metrics =
      study::ParseMetrics(ReadWholeFile(dir + "/run/metrics.jsonl").value_or(""), o.warmup);
  absl::StatusOr<study::TraceMeasurement> trace =
      study::ParseTrace(ReadWholeFile(dir + "/run/trace.json").value_or(""), workers, o.warmup);
  if (!metrics.ok() || !trace.ok()) {
    m.error = std::string(!metrics.ok() ? metrics.status().message() : trace.status().message());
    return m;
  }
  m.metrics = *metrics;
  m.trace = *trace;
  absl::StatusOr<Config> job = ParseConfig(JobYaml(o, schedule, workers));
  const double payload =
      scheduler::PayloadBytes(static_cast<int64_t>(job->train.batch_size) * job->model.seq_len,
                              job->model.residual.n_streams, job->model.d_model, 4);
  absl::StatusOr<study::ModelBubbles> model = study::ComputeModelBubbles(
      schedule, workers, job->train.microbatches,
      study::CostsFrom(study::MeanStageCosts(*trace), payload, trace->transfer_ms));
  if (!model.ok()) {
    m.error = std::string(model.status().message());
    return m;
  }
  m.model = *model;
  m.ok = true;
  return m;
}

constexpr double kRunLimitS = 900;

// One `xhc launch` of `schedule` on `workers` ranks, alone on the machine.
Measured RunOne(const Options& o, const std::string& xhc, const std::string& schedule, int workers,
                const std::string& tag = "") {
  const std::string dir = PrepareRun(o, schedule, workers, tag);
  std::fprintf(stderr, "pipeline_bench: %s on %d rank(s)...\n", schedule.c_str(), workers);
  const study::ChildCommand cmd = LaunchCommand(xhc, dir);
  return Measure(o, schedule, workers, dir,
                 study::RunChild(cmd.argv, cmd.env, cmd.log_path, kRunLimitS));
}

// Two one-rank runs of the R = 2 job's work at once (the side-by-side reference).
std::vector<Measured> RunOneRankSideBySide(const Options& o, const std::string& xhc,
                                           const std::string& tag) {
  const std::string a = PrepareRun(o, "1f1b", 1, tag + "_a");
  const std::string b = PrepareRun(o, "1f1b", 1, tag + "_b");
  std::fprintf(stderr, "pipeline_bench: 1f1b on 1 rank, two at once...\n");
  const std::vector<study::ChildResult> children =
      study::RunChildren({LaunchCommand(xhc, a), LaunchCommand(xhc, b)}, kRunLimitS);
  return {Measure(o, "1f1b", 1, a, children[0]), Measure(o, "1f1b", 1, b, children[1])};
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

std::string List(const std::vector<double>& v) {
  std::vector<std::string> parts;
  for (double x : v) parts.push_back(absl::StrFormat("%.4f", x));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

int Main(const Options& o, const std::string& xhc) {
  std::vector<std::string> rows;
  std::vector<double> one_rank;
  for (const std::string& schedule : o.schedules) {
    // Per pair (the one-rank reference, then the R = 2 run): the reference runs right before
    // each R = 2 run, not once for all: this machine's speed drifts by 5-10% over the minutes
    // a whole bench takes, and a reference measured minutes earlier moved the ratios by as
    // much as the schedules differ.
    std::vector<double> effs, refs, tps, bubbles, busy, compute_ratio;
    std::vector<double> sbs_refs, sbs_effs, sbs_compute_ratio;  // --side_by_side
    std::vector<std::vector<double>> exposed, other_cpu;        // per rank, one entry per pair
    std::string error;
    for (int rep = 0; rep < o.repeats; ++rep) {
      const std::string suffix = o.repeats > 1 ? absl::StrCat("_", rep) : "";
      const Measured base =
          RunOne(o, xhc, "1f1b", 1, absl::StrCat("one_rank_before_", schedule, suffix));
      if (!base.ok) {
        std::fprintf(stderr, "pipeline_bench: the one-rank run failed: %s\n", base.error.c_str());
        return 1;
      }
      std::vector<Measured> sbs;
      if (o.side_by_side) {
        sbs = RunOneRankSideBySide(o, xhc, absl::StrCat("side_by_side_before_", schedule, suffix));
        for (const Measured& r : sbs) {
          if (!r.ok) {
            std::fprintf(stderr, "pipeline_bench: a side-by-side one-rank run failed: %s\n",
                         r.error.c_str());
            return 1;
          }
        }
      }
      const Measured m = RunOne(o, xhc, schedule, 2, absl::StrCat(schedule, "_2", suffix));
      if (!m.ok) {
        error = m.error;
        break;
      }
      one_rank.push_back(base.metrics.tokens_per_s);
      refs.push_back(base.metrics.tokens_per_s);
      tps.push_back(m.metrics.tokens_per_s);
      effs.push_back(m.metrics.tokens_per_s / (2 * base.metrics.tokens_per_s));
      bubbles.push_back(Mean(m.model.simulated));
      // efficiency = busy / compute_vs_one_rank x (the one-rank step over its compute, ~1).
      double compute = 0;
      for (double c : m.trace.compute_ms) compute += c;
      busy.push_back(compute / (2 * m.metrics.step_s * 1e3));
      compute_ratio.push_back(compute / base.trace.compute_ms[0]);
      if (o.side_by_side) {
        const double sbs_tps = (sbs[0].metrics.tokens_per_s + sbs[1].metrics.tokens_per_s) / 2;
        sbs_refs.push_back(sbs_tps);
        sbs_effs.push_back(m.metrics.tokens_per_s / (2 * sbs_tps));
        sbs_compute_ratio.push_back(
            compute / ((sbs[0].trace.compute_ms[0] + sbs[1].trace.compute_ms[0]) / 2));
      }
      exposed.resize(m.metrics.exposed_comm.size());
      for (size_t r = 0; r < exposed.size(); ++r) exposed[r].push_back(m.metrics.exposed_comm[r]);
      other_cpu.resize(m.metrics.other_cpu.size());
      for (size_t r = 0; r < other_cpu.size(); ++r) {
        other_cpu[r].push_back(m.metrics.other_cpu[r]);
      }
    }
    if (!error.empty()) {
      rows.push_back(absl::StrFormat("\"%s\": {\"error\": \"%s\"}", schedule,
                                     absl::StrReplaceAll(error, {{"\"", "'"}, {"\n", " "}})));
      continue;
    }
    const double efficiency = Median(effs), bubble = Median(bubbles);
    const double target = 0.9 * (1 - bubble);
    std::vector<double> exposed_median, other_cpu_median;
    for (const auto& e : exposed) exposed_median.push_back(Median(e));
    for (const auto& c : other_cpu) other_cpu_median.push_back(Median(c));
    rows.push_back(absl::StrFormat(
        "\"%s\": {\"tokens_per_s\": %.1f, \"one_rank_tokens_per_s\": %.1f, \"efficiency\": %.3f, "
        "\"efficiency_per_pair\": %s, \"simulated_bubble\": %.3f, \"efficiency_target\": %.3f, "
        "\"meets_target\": %s, \"exposed_comm\": %s, \"other_cpu\": %s, "
        "\"busy_fraction\": %.3f, "
        "\"compute_vs_one_rank\": %.3f, \"compute_vs_one_rank_per_pair\": %s%s}",
        schedule, Median(tps), Median(refs), efficiency, List(effs), bubble, target,
        efficiency >= target ? "true" : "false", List(exposed_median), List(other_cpu_median),
        Median(busy), Median(compute_ratio), List(compute_ratio),
        !o.side_by_side ? std::string()
                        : absl::StrFormat(", \"side_by_side_one_rank_tokens_per_s\": %.1f, "
                                          "\"efficiency_vs_side_by_side\": %.3f, "
                                          "\"efficiency_vs_side_by_side_per_pair\": %s, "
                                          "\"compute_vs_side_by_side\": %.3f",
                                          Median(sbs_refs), Median(sbs_effs), List(sbs_effs),
                                          Median(sbs_compute_ratio))));
  }
  std::printf(
      "{\"residual\": \"%s\", \"ranks\": 2, \"threads_per_rank\": 1, \"cpu\": \"%s\", "
      "\"cores\": %ld, \"steps\": %d, \"warmup_steps\": %d, \"repeats\": %d, "
      "\"one_rank_tokens_per_s\": %.1f, \"schedules\": {%s}}\n",
      o.residual.c_str(), CpuModelName().c_str(), sysconf(_SC_NPROCESSORS_ONLN), o.steps, o.warmup,
      o.repeats, Mean(one_rank), absl::StrJoin(rows, ", ").c_str());
  return 0;
}

}  // namespace
}  // namespace xhc

int main(int argc, char** argv) {
  xhc::Options o;
  // Flags come in pairs; a lone one (--help included) gets the usage, not a silent default run.
  if (argc % 2 == 0) {
    std::fprintf(stderr,
                 "usage: pipeline_bench [--residual TYPE] [--out DIR] [--steps S] "
                 "[--warmup W] [--repeats K] [--side_by_side 0|1] "
                 "[--schedules S1,S2,...]\n");
    return 2;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--residual"))
      o.residual = argv[i + 1];
    else if (!std::strcmp(argv[i], "--out"))
      o.out = argv[i + 1];
    else if (!std::strcmp(argv[i], "--steps"))
      o.steps = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup"))
      o.warmup = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats"))
      o.repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--side_by_side")) {
      const std::string v = argv[i + 1];
      if (v != "0" && v != "1") {
        std::fprintf(stderr, "--side_by_side: expected 0 or 1, got '%s'\n", v.c_str());
        return 2;
      }
      o.side_by_side = v == "1";
    } else if (!std::strcmp(argv[i], "--schedules")) {
      o.schedules = absl::StrSplit(argv[i + 1], ',');
      for (const std::string& name : o.schedules) {
        if (std::find(xhc::kSchedules.begin(), xhc::kSchedules.end(), name) ==
            xhc::kSchedules.end()) {
          std::fprintf(stderr, "--schedules: unknown schedule '%s' (%s)\n", name.c_str(),
                       absl::StrJoin(xhc::kSchedules, ", ").c_str());
          return 2;
        }
      }
    } else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      return 2;
    }
  }
  if (o.steps <= o.warmup) {
    std::fprintf(stderr, "--steps must exceed --warmup\n");
    return 2;
  }
  if (o.repeats < 1 || o.repeats > 99) {
    std::fprintf(stderr, "--repeats must be in [1, 99]\n");
    return 2;
  }
  // The xhc binary beside this one in the runfiles (the workspace is named xhc; `bazel run`
  // also starts in that directory), else the workspace's bazel-bin.
  // Under `bazel test` the runfiles tree is TEST_SRCDIR's instead.
  const std::string self = argv[0];
  const char* test_srcdir = std::getenv("TEST_SRCDIR");
  std::string xhc;
  for (const std::string& c :
       {self + ".runfiles/xhc/xhc", self + ".runfiles/__main__/xhc",
        test_srcdir != nullptr ? absl::StrCat(test_srcdir, "/xhc/xhc") : std::string(),
        std::string("bazel-bin/xhc")}) {
    if (std::filesystem::is_regular_file(c)) {
      xhc = c;
      break;
    }
  }
  if (xhc.empty()) {
    std::fprintf(stderr,
                 "pipeline_bench: no xhc binary beside %s (runfiles) or in bazel-bin/; "
                 "build it with: bazel build //:xhc\n",
                 argv[0]);
    return 2;
  }
  return xhc::Main(o, std::filesystem::absolute(xhc).string());
}
