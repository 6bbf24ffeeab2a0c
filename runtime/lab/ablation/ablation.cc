#include "runtime/lab/ablation/ablation.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/common/config.h"
#include "runtime/data/corpus.h"
#include "runtime/lab/study/runner.h"

namespace xhc::ablation {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

double Since(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

std::string Clock(double s) {
  const int t = static_cast<int>(s + 0.5);
  return absl::StrFormat("%dm%02ds", t / 60, t % 60);
}

// A study killed while a run was training leaves that child `xhc train` (its own process
// group) running; the restarted study ends it before reusing its directory. The pid file is
// trusted only while that process's command line still names the run directory.
void EndStaleChild(const std::string& run_dir) {
  std::ifstream in(run_dir + "/child.pid");
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 1) return;
  const std::string args = ReadWholeFile(absl::StrCat("/proc/", pid, "/cmdline")).value_or("");
  if (args.find(run_dir) == std::string::npos) return;
  kill(-pid, SIGKILL);
  for (int i = 0; i < 100 && fs::exists(absl::StrCat("/proc/", pid)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The first `rows` validation windows of the corpus, written once as an `xhc eval` data file
// (rows of T + 1 bytes), so every run's diagnostics read the same held-out tokens.
absl::Status WriteDiagnosticsBatch(const Config& job, int rows, const std::string& path) {
  ASSIGN_OR_RETURN(Corpus corpus, LoadCorpus(job.data.train, job.data.val_fraction,
                                             static_cast<int64_t>(job.model.seq_len + 1) * 8));
  const size_t need = static_cast<size_t>(rows) * (job.model.seq_len + 1);
  if (corpus.val.size() < need) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ablation.diagnostics_batch: %d rows need %d validation bytes, the corpus has %d", rows,
        need, corpus.val.size()));
  }
  return WriteFileAtomic(path, std::string(corpus.val.begin(), corpus.val.begin() + need));
}

struct Context {
  AblationOptions options;
  AblationConfig config;
  std::string batch_path;
  int seq_len = 0;
};

std::string FailureText(const study::ChildResult& child, double timeout_s) {
  if (child.timed_out) return absl::StrFormat("timed out after %.0f s", timeout_s);
  if (!child.error.empty()) return child.error;
  return absl::StrCat("exit code ", child.exit_code);
}

RunResult ExecuteRun(const Context& ctx, const AblationRun& run) {
  RunResult r;
  r.id = run.id;
  r.variant = run.variant;
  r.seed = run.seed;
  r.steps = ctx.config.steps;
  const absl::StatusOr<Config> job = ParseConfig(run.job_yaml);  // validated by the expansion
  r.flops = FlopsPerToken(job->model);
  r.tokens_per_step =
      static_cast<double>(job->train.microbatches) * job->train.batch_size * job->model.seq_len;
  const std::string dir = absl::StrCat(ctx.options.out_dir, "/runs/", run.id);
  EndStaleChild(dir);
  std::error_code ec;
  fs::remove_all(dir, ec);  // a partial run starts again: its metrics would mix otherwise
  fs::create_directories(dir, ec);
  const std::string cfg = dir + "/config.yaml", log = dir + "/log.txt";
  if (absl::Status s = WriteFileAtomic(cfg, run.job_yaml); !s.ok()) {
    r.failure = s.ToString();
    return r;
  }
  const std::string threads = absl::StrCat(ctx.config.threads_per_run);
  const std::vector<std::pair<std::string, std::string>> env = {{"OMP_NUM_THREADS", threads},
                                                                {"OPENBLAS_NUM_THREADS", threads}};
  // The pid file is written by a tiny shell in front of the child (exec keeps the pid), so
  // it exists before training starts.
  const study::ChildResult child =
      study::RunChild({"/bin/sh", "-c",
                       "echo $$ > \"$1/child.pid\" && exec \"$2\" train --config "
                       "\"$1/config.yaml\" --out \"$1/run\"",
                       "sh", dir, ctx.options.xhc_binary},
                      env, log, ctx.config.run_timeout_s);
  r.wall_s = child.wall_s;
  if (!child.error.empty() || child.exit_code != 0) {
    r.failure =
        absl::StrCat(FailureText(child, ctx.config.run_timeout_s), "\n", study::TailLines(log, 6));
    return r;
  }
  absl::StatusOr<std::string> metrics = ReadWholeFile(dir + "/run/metrics.jsonl");
  absl::Status parsed = metrics.ok() ? ParseTrainMetrics(*metrics, &r) : metrics.status();
  if (!parsed.ok()) {
    r.failure = absl::StrCat("measurement: ", parsed.ToString());
    return r;
  }
  r.ok = true;
  const std::string diag = dir + "/diagnostics.json";
  const study::ChildResult eval = study::RunChild(
      {ctx.options.xhc_binary, "eval", "--checkpoint", dir + "/run", "--data", ctx.batch_path,
       "--batch", absl::StrCat(ctx.config.diagnostics_batch), "--seq-len",
       absl::StrCat(ctx.seq_len), "--diagnostics", "--diagnostics-out", diag},
      env, dir + "/diagnostics.log", ctx.config.run_timeout_s);
  absl::StatusOr<std::string> text = ReadWholeFile(diag);
  if (eval.exit_code != 0 || !text.ok()) {
    r.diagnostics_failure = absl::StrCat(FailureText(eval, ctx.config.run_timeout_s), "\n",
                                         study::TailLines(dir + "/diagnostics.log", 4));
  } else if (auto d = ParseDiagnosticsJson(*text); !d.ok()) {
    r.diagnostics_failure = d.status().ToString();
  } else {
    r.diagnostics = *std::move(d);
    r.has_diagnostics = true;
  }
  return r;
}

std::string ResultPath(const std::string& out_dir, const std::string& id) {
  return absl::StrCat(out_dir, "/results/", id, ".json");
}

}  // namespace

namespace {

// The output folders, and the one diagnostics batch every run is measured on.
absl::Status PrepareOutDir(const Context& ctx, const Config& first) {
  std::error_code ec;
  for (const char* sub : {"/results", "/runs", "/charts"}) {
    fs::create_directories(ctx.options.out_dir + sub, ec);
    if (ec) return absl::InternalError(absl::StrCat(ctx.options.out_dir, sub, ": ", ec.message()));
  }
  return WriteDiagnosticsBatch(first, ctx.config.diagnostics_batch, ctx.batch_path);
}

// Results of an earlier invocation: an ok one for the same variant, seed and steps is kept in
// out->runs; the indices of the runs still to do are returned.
std::vector<size_t> KeepEarlierResults(const std::string& out_dir,
                                       const std::vector<AblationRun>& runs, AblationOutcome* out) {
  out->runs.resize(runs.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < runs.size(); ++i) {
    absl::StatusOr<std::string> text = ReadWholeFile(ResultPath(out_dir, runs[i].id));
    absl::StatusOr<RunResult> prior =
        text.ok() ? ParseRunResultJson(*text) : absl::StatusOr<RunResult>(text.status());
    if (prior.ok() && prior->ok && prior->variant == runs[i].variant &&
        prior->seed == runs[i].seed && prior->steps == out->config.steps) {
      out->runs[i] = *std::move(prior);
      ++out->skipped;
    } else {
      todo.push_back(i);
    }
  }
  return todo;
}

// Progress lines and the ETA, weighted by each run's training FLOPs, for runs finishing on
// several threads.
class AblationProgress {
 public:
  AblationProgress(std::ostream& out, SteadyClock::time_point t0, size_t num_todo,
                   double total_cost)
      : out_(out), t0_(t0), num_todo_(num_todo), total_cost_(total_cost) {}

  void Started(const AblationRun& run) {
    std::lock_guard<std::mutex> lock(mu_);
    out_ << absl::StrFormat("[start %s]  elapsed %s\n", run.id, Clock(Since(t0_))) << std::flush;
  }

  // Reports a finished run; returns the runs still pending. Call with mu() held, and keep it
  // while updating the outcome, so the report written next matches the count.
  int Finished(const AblationRun& run, const RunResult& r, double cost, const absl::Status& saved) {
    ++finished_;
    done_cost_ += cost;
    const double elapsed = Since(t0_);
    const std::string eta =
        done_cost_ > 0 ? Clock(elapsed * (total_cost_ - done_cost_) / done_cost_) : "?";
    if (r.ok) {
      out_ << absl::StrFormat(
          "[%d/%zu] %s: val loss %.4f, %.0f tok/s, %.0f s%s  "
          "elapsed %s  ETA %s\n",
          finished_, num_todo_, run.id, r.final_val_loss(), r.tokens_per_s, r.wall_s,
          r.has_diagnostics ? "" : "  (diagnostics FAILED)", Clock(elapsed), eta);
    } else {
      ++failed_;
      out_ << absl::StrFormat("[%d/%zu] %s FAILED: %s\n  elapsed %s  ETA %s\n", finished_,
                              num_todo_, run.id, r.failure, Clock(elapsed), eta);
    }
    if (!saved.ok()) out_ << "  result not saved: " << saved.ToString() << "\n";
    return static_cast<int>(num_todo_) - finished_;
  }

  std::mutex& mu() { return mu_; }
  std::ostream& out() { return out_; }
  int finished() const { return finished_; }
  int failed() const { return failed_; }

 private:
  std::mutex mu_;
  std::ostream& out_;
  const SteadyClock::time_point t0_;
  const size_t num_todo_;
  const double total_cost_;
  int finished_ = 0, failed_ = 0;
  double done_cost_ = 0;
};

// The charts and report.md for the runs so far; both are written whichever fails, and the
// first failure is returned.
absl::Status WriteReport(const AblationOutcome& out, const std::string& out_dir) {
  absl::Status charts = WriteAblationCharts(out, out_dir);
  absl::Status report = WriteFileAtomic(out_dir + "/report.md", RenderAblationReport(out));
  return charts.ok() ? report : charts;
}

}  // namespace

absl::Status RunAblation(const AblationOptions& o, std::ostream& progress) {
  const auto t0 = SteadyClock::now();
  AblationOutcome out;
  ASSIGN_OR_RETURN(out.config, LoadAblationConfig(o.config_path));
  ASSIGN_OR_RETURN(std::vector<AblationRun> runs, ExpandAblationRuns(out.config));
  ASSIGN_OR_RETURN(Config first, ParseConfig(runs.front().job_yaml));
  Context ctx{o, out.config, o.out_dir + "/diagnostics_batch.bin", first.model.seq_len};
  // The runs start through /bin/sh (ExecuteRun), for which /proc/self/exe would be the shell.
  std::error_code exe_ec;
  const fs::path exe = fs::read_symlink(o.xhc_binary, exe_ec);
  if (!exe_ec) ctx.options.xhc_binary = exe.string();
  RETURN_IF_ERROR(PrepareOutDir(ctx, first));
  std::vector<size_t> todo = KeepEarlierResults(o.out_dir, runs, &out);
  // The costliest runs first, so the last ones to finish are short and the workers end
  // together.
  std::vector<double> cost(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    cost[i] = FlopsPerToken(ParseConfig(runs[i].job_yaml)->model).training();
  }
  std::stable_sort(todo.begin(), todo.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
  double total_cost = 0;
  for (size_t i : todo) total_cost += cost[i];
  progress << absl::StrFormat(
                  "ablation: %zu runs (%zu variants x %zu seeds, %d steps each), "
                  "%d already done, %d at a time x %d thread(s)\n",
                  runs.size(), out.config.variants.size(), out.config.seeds.size(),
                  out.config.steps, out.skipped, out.config.parallel_runs,
                  out.config.threads_per_run)
           << std::flush;
  AblationProgress tracker(progress, t0, todo.size(), total_cost);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t t = next++; t < todo.size(); t = next++) {
      const AblationRun& run = runs[todo[t]];
      tracker.Started(run);
      RunResult r = ExecuteRun(ctx, run);
      absl::Status saved = WriteFileAtomic(ResultPath(o.out_dir, run.id), RunResultJson(r));
      std::lock_guard<std::mutex> lock(tracker.mu());
      out.pending = tracker.Finished(run, r, cost[todo[t]], saved);
      out.runs[todo[t]] = std::move(r);
      // The report so far, so a long study (or one stopped early) always has one.
      out.wall_s = Since(t0);
      if (absl::Status report = WriteReport(out, o.out_dir); !report.ok()) {
        tracker.out() << "  partial report not written: " << report.ToString() << "\n";
      }
      tracker.out() << std::flush;
    }
  };
  std::vector<std::thread> pool;
  const int workers = std::min<int>(out.config.parallel_runs, std::max<size_t>(todo.size(), 1));
  for (int w = 0; w < workers; ++w) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  out.wall_s = Since(t0);
  out.pending = 0;
  RETURN_IF_ERROR(WriteReport(out, o.out_dir));
  progress << absl::StrFormat(
      "ablation done in %s: %zu runs (%d run now, %d failed, %d from "
      "earlier); report %s/report.md\n",
      Clock(out.wall_s), runs.size(), tracker.finished(), tracker.failed(), out.skipped, o.out_dir);
  return absl::OkStatus();
}

}  // namespace xhc::ablation
