// Controller::Run: the step loop, checkpoints, metrics and the merged trace.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/exact_format.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/common/log.h"
#include "runtime/control/controller/controller.h"
#include "runtime/control/controller/saved_schedule.h"
#include "runtime/control/controller/trace_writer.h"

namespace xhc::controller {
namespace fs = std::filesystem;
namespace {

double Since(Controller::Clock::time_point t0) {
  return std::chrono::duration<double>(Controller::Clock::now() - t0).count();
}

}  // namespace

absl::Status Controller::RunStep(int64_t step, bool evaluate) {
  proto::Command cmd;
  cmd.set_kind(proto::Command::RUN_STEP);
  cmd.set_step(step);
  cmd.set_evaluate(evaluate);
  cmd.set_total_steps(total_steps_);
  const auto t0 = Clock::now();
  Broadcast(cmd);
  ASSIGN_OR_RETURN(
      std::vector<proto::StepReport> reports,
      CollectReports({proto::StepReport::kStepResult, step}, config_.fault.step_timeout_s));
  const double step_s = Since(t0);
  StepRecord rec = MakeStepRecord(step, step_s, reports);
  RecordStep(rec, reports);
  if (!eta_) eta_ = std::make_unique<EtaEstimator>(total_steps_, config_.train.eval_every);
  eta_->Add(step + 1, step_s, evaluate);
  if (!options_.quiet) PrintStep(rec);
  return absl::OkStatus();
}

StepRecord Controller::MakeStepRecord(int64_t step, double step_s,
                                      const std::vector<proto::StepReport>& reports) const {
  StepRecord rec;
  rec.step = step + 1;
  rec.generation = generation_;
  rec.wall_time = WallTime();
  rec.step_s = step_s;
  rec.grad_norm = reports[0].step_result().grad_norm();
  // Mean of the micro-batch losses in micro-batch order: the same sum, in the same order,
  // as single-process training, so the reported loss is bit-identical.
  rec.microbatch_losses.assign(config_.train.microbatches, 0.0);
  std::vector<double> val;
  for (const proto::StepReport& report : reports) {
    const proto::StepResult& r = report.step_result();
    for (int i = 0; i < r.losses_size(); ++i) {
      rec.microbatch_losses[r.loss_microbatches(i)] = r.losses(i);
    }
    for (double v : r.val_losses()) val.push_back(v);
  }
  for (double l : rec.microbatch_losses) rec.loss += l;
  rec.loss /= config_.train.microbatches;
  const double tokens = static_cast<double>(config_.train.microbatches) * config_.train.batch_size *
                        config_.model.seq_len;
  rec.tokens_per_s = tokens / step_s;
  // Per rank, as fractions of its step: exposed communication (transfers waited for after
  // their data existed), waiting on peers still computing, and everything but compute.
  for (const proto::StepReport& report : reports) {
    const proto::StepResult& r = report.step_result();
    rec.peak_rss_mb.push_back(r.peak_rss_bytes() / 1048576.0);
    rec.exposed_comm.push_back(r.comm_wait_s() / std::max(r.step_s(), 1e-9));
    rec.peer_wait.push_back(r.peer_wait_s() / std::max(r.step_s(), 1e-9));
    rec.bubble.push_back(1.0 - r.compute_s() / std::max(r.step_s(), 1e-9));
    rec.other_cpu.push_back(r.other_threads_cpu_s() / std::max(r.step_s(), 1e-9));
    if (plan_.data_parallel > 1) rec.replica_grad_wait_s.push_back(r.replica_grad_wait_s());
  }
  // Same arithmetic as single-process ValidationLoss: sum in batch order, then divide.
  if (!val.empty()) {
    double val_loss = 0;
    for (double v : val) val_loss += v;
    rec.val_loss = val_loss / static_cast<double>(val.size());
  }
  return rec;
}

void Controller::RecordStep(const StepRecord& rec, const std::vector<proto::StepReport>& reports) {
  std::vector<proto::Span> spans;
  std::vector<int> span_ranks;
  for (const proto::StepReport& report : reports) {
    for (const proto::Span& s : report.step_result().spans()) {
      spans.push_back(s);
      span_ranks.push_back(report.rank());
    }
  }
  trace_spans_.insert(trace_spans_.end(), spans.begin(), spans.end());
  trace_ranks_.insert(trace_ranks_.end(), span_ranks.begin(), span_ranks.end());
  // metrics.jsonl first: whatever the dashboard or /metrics shows is already on disk.
  std::ofstream((fs::path(options_.run_dir) / "metrics.jsonl").string(), std::ios::app)
      << MetricsLine(rec);
  std::lock_guard<std::mutex> lock(mu_);
  current_step_ = rec.step;
  last_loss_ = rec.loss;
  tokens_per_s_ = rec.tokens_per_s;
  last_spans_step_ = rec.step;
  last_spans_ = std::move(spans);
  last_span_ranks_ = std::move(span_ranks);
  step_records_.push_back(rec);
}

void Controller::PrintStep(const StepRecord& rec) const {
  std::vector<std::string> exposed;
  for (double e : rec.exposed_comm) exposed.push_back(absl::StrFormat("%.4f", e));
  std::printf("step %5d/%d  loss %.4f%s  %.0f tok/s  exposed comm %s  ETA %s\n",
              static_cast<int>(rec.step), static_cast<int>(total_steps_), rec.loss,
              rec.val_loss ? absl::StrFormat("  val %.4f", *rec.val_loss).c_str() : "",
              rec.tokens_per_s, absl::StrJoin(exposed, "/").c_str(),
              FormatEta(eta_->SecondsLeft(rec.step)).c_str());
  std::fflush(stdout);
}

absl::Status Controller::Checkpoint(int64_t step) {
  RETURN_IF_ERROR(FinishCheckpoint(/*block=*/true));  // one checkpoint in flight at a time
  const std::string root = (fs::path(options_.run_dir) / "checkpoints").string();
  proto::Command cmd;
  cmd.set_kind(proto::Command::CHECKPOINT);
  cmd.set_step(step);
  cmd.set_checkpoint_dir((fs::path(root) / StepDirName(step)).string());
  pending_ckpt_ = step;
  pending_ckpt_t0_ = Clock::now();
  Broadcast(cmd);
  return config_.checkpoint.async ? absl::OkStatus() : FinishCheckpoint(/*block=*/true);
}

bool Controller::ReportsComplete(ReportKey key) {
  std::lock_guard<std::mutex> lock(mu_);
  for (int r = 0; r < world_size_; ++r) {
    if (!reports_.count({key, r})) return false;
  }
  return true;
}

absl::Status Controller::FinishCheckpoint(bool block) {
  if (pending_ckpt_ < 0) return absl::OkStatus();
  const int64_t step = pending_ckpt_;
  const ReportKey key{proto::StepReport::kCheckpointResult, step};
  if (!block && !ReportsComplete(key)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::vector<proto::StepReport> reports,
                   CollectReports(key, config_.fault.step_timeout_s));
  pending_ckpt_ = -1;
  Manifest m;
  m.step = step;
  m.config_yaml = config_.source_yaml;
  m.sampler_step = step;
  m.rng = {{"seed", absl::StrCat(config_.train.seed)}};
  // Replica 0 alone writes shards, so the checkpoint is the same whatever data_parallel is.
  std::vector<int> all_stages(plan_.stages.size());
  for (size_t st = 0; st < all_stages.size(); ++st) all_stages[st] = static_cast<int>(st);
  m.layout = absl::StrFormat("%d ranks %s, layers per stage [%s]", plan_.num_ranks(),
                             plan_.schedule.type, plan::DescribeStageLayers(plan_, all_stages));
  if (plan_.data_parallel > 1) absl::StrAppend(&m.layout, " x ", plan_.data_parallel, " replicas");
  CheckpointRecord rec;
  rec.step = step;
  rec.async = config_.checkpoint.async;
  for (const proto::StepReport& report : reports) {
    const proto::CheckpointResult& r = report.checkpoint_result();
    rec.snapshot_stall_s = std::max(rec.snapshot_stall_s, r.snapshot_stall_s());
    rec.write_s = std::max(rec.write_s, r.write_s());
    for (const proto::ShardInfo& s : r.shards()) {
      rec.bytes += s.bytes();
      m.shards.push_back({s.file(), s.bytes(), s.xxhash64(),
                          std::vector<std::string>(s.tensors().begin(), s.tensors().end())});
    }
  }
  const std::string root = (fs::path(options_.run_dir) / "checkpoints").string();
  RETURN_IF_ERROR(CommitCheckpoint(root, m, config_.checkpoint.keep));
  rec.commit_latency_s = Since(pending_ckpt_t0_);
  rec.wall_time = WallTime();
  const double write = rec.write_s, mb = rec.bytes / 1e6;
  LogInfo(
      "checkpoint step %d committed: %d shards, %.1f MB, snapshot stall %.1f ms, write "
      "%.3f s (%.0f MB/s), %.2f s after the request",
      step, m.shards.size(), mb, rec.snapshot_stall_s * 1e3, write, write > 0 ? mb / write : 0.0,
      rec.commit_latency_s);
  std::ofstream((fs::path(options_.run_dir) / "metrics.jsonl").string(), std::ios::app)
      << MetricsLine(rec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    checkpoint_records_.push_back(rec);
  }
  return absl::OkStatus();
}

void Controller::WriteTrace() {
  const std::string path = (fs::path(options_.run_dir) / "trace.json").string();
  absl::Status s = WriteChromeTrace(path, trace_spans_, trace_ranks_, world_size_);
  if (!s.ok()) LogWarning("trace: %s", s.message());
}

absl::Status Controller::ResumeAll(const std::string& checkpoint_dir) {
  proto::Command cmd;
  cmd.set_kind(proto::Command::RESUME);
  cmd.set_checkpoint_dir(checkpoint_dir);
  Broadcast(cmd);
  return CollectReports({proto::StepReport::kReady, generation_}, config_.fault.step_timeout_s)
      .status();
}

namespace {

// The newest committed checkpoint that verifies ("" = none: the seeded initial weights,
// which are exactly reproducible, are the implicit checkpoint of step 0).
std::pair<std::string, int64_t> NewestValidCheckpoint(const std::string& run_dir) {
  const std::string root = (fs::path(run_dir) / "checkpoints").string();
  for (const std::string& dir : CommittedStepDirs(root)) {
    absl::StatusOr<Manifest> m = VerifyCheckpoint(dir);
    if (m.ok()) return {dir, m->step};
    LogWarning("recovery: skipping %s: %s", dir, m.status().message());
  }
  return {"", 0};
}

}  // namespace

absl::StatusOr<int64_t> Controller::Recover(const absl::Status& failure, int64_t failed_step) {
  const auto t0 = Clock::now();
  LogWarning("failure detected at step %d: %s", failed_step + 1, failure.message());
  pending_ckpt_ = -1;  // never committed: its step directory has no manifest
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;  // under the lock: Report and Register read it on gRPC threads
    reports_.clear();
    state_ = "recovering";
  }
  proto::Command abort;
  abort.set_kind(proto::Command::ABORT);
  Broadcast(abort);
  // A peer's death is often seen first as a failed receive on a survivor: give the dead
  // worker's stream a moment to close so it is counted below.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const std::vector<int> dead = DeadOrHungRanks();
  for (int r : dead) {
    if (restarts_used_ >= config_.fault.max_restarts) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cannot recover: restarts exhausted (fault.max_restarts = %d); last failure: %s",
          config_.fault.max_restarts, failure.message()));
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      Worker& w = workers_[r];
      w.registered = w.attached = w.alive = false;
      ++w.epoch;  // the old stream (if any) is closed by its writer thread
      w.outbox.clear();
      cv_.notify_all();
    }
    ++restarts_used_;
    if (options_.restart_worker) {
      RETURN_IF_ERROR(options_.restart_worker(r));
      LogInfo("recovery: restarted worker rank %d (restart %d of %d)", r, restarts_used_,
              config_.fault.max_restarts);
    } else {
      LogInfo("recovery: waiting up to %.0f s for a worker to take rank %d",
              options_.replace_timeout_s, r);
    }
  }
  const double saved_timeout = options_.register_timeout_s;
  options_.register_timeout_s = options_.replace_timeout_s;
  absl::Status joined = WaitForWorkers();
  options_.register_timeout_s = saved_timeout;
  RETURN_IF_ERROR(joined);
  const auto [dir, step] = NewestValidCheckpoint(options_.run_dir);
  RETURN_IF_ERROR(ResumeAll(dir));
  RecoveryRecord rec;
  rec.generation = generation_;
  rec.wall_time = WallTime();
  rec.failed_step = failed_step + 1;
  rec.resumed_step = step;
  rec.replaced_ranks = dead;
  rec.reason = std::string(failure.message());
  rec.seconds = Since(t0);
  LogInfo(
      "recovered in %.2f s: generation %d, resuming from %s (step %d); %d step(s) of work "
      "lost",
      rec.seconds, generation_, dir.empty() ? "the initial weights" : dir, step,
      failed_step - step);
  {
    std::lock_guard<std::mutex> lock(mu_);
    recovery_records_.push_back(std::move(rec));
  }
  return step;
}

absl::Status Controller::Run() {
  std::error_code ec;
  fs::create_directories(options_.run_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", options_.run_dir, ": ", ec.message()));
  std::ofstream((fs::path(options_.run_dir) / "config.yaml").string()) << config_.source_yaml;
  // A --schedule-csv is not in config.yaml: keep the CSV itself for --resume.
  RETURN_IF_ERROR(SaveSchedule(plan_, options_.run_dir));
  RETURN_IF_ERROR(WaitForWorkers());
  LogInfo("all %d workers joined; %s schedule, %d stages, %d replica(s), steps %d..%d", world_size_,
          plan_.schedule.type, plan_.schedule.num_stages, plan_.data_parallel, start_step_,
          total_steps_);
  absl::Status status = ResumeAll(resume_from_);
  int64_t step = start_step_;
  while (status.ok() && step < total_steps_) {
    const int64_t done = step + 1;
    const bool evaluate = config_.train.eval_every > 0 &&
                          (done % config_.train.eval_every == 0 || done == total_steps_);
    absl::Status s = RunStep(step, evaluate);
    const bool periodic = config_.checkpoint.every > 0 && done % config_.checkpoint.every == 0;
    if (s.ok() && (periodic || done == total_steps_)) s = Checkpoint(done);
    if (s.ok()) s = FinishCheckpoint(/*block=*/false);
    if (s.ok()) {
      step = done;
      continue;
    }
    if (absl::IsCancelled(s)) {
      status = s;
      break;
    }
    absl::StatusOr<int64_t> resumed = Recover(s, step);
    // Another worker can die while the job is recovering: recover again (the restart budget
    // bounds this). Exhausted restarts (kFailedPrecondition) or a stop end the job.
    for (int attempt = 1;
         attempt <= config_.fault.max_restarts && !resumed.ok() &&
         (absl::IsUnavailable(resumed.status()) || absl::IsDeadlineExceeded(resumed.status()) ||
          absl::IsInternal(resumed.status()));
         ++attempt) {
      LogWarning("recovery attempt %d failed: %s", attempt, resumed.status().message());
      resumed = Recover(resumed.status(), step);
    }
    if (!resumed.ok()) {
      status = resumed.status();
      break;
    }
    step = *resumed;
  }
  if (status.ok()) status = FinishCheckpoint(/*block=*/true);
  WriteTrace();
  {
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
  }
  proto::Command bye;
  bye.set_kind(status.ok() ? proto::Command::SHUTDOWN : proto::Command::ABORT);
  Broadcast(bye);
  if (!status.ok()) {
    proto::Command shutdown;
    shutdown.set_kind(proto::Command::SHUTDOWN);
    Broadcast(shutdown);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    state_ = status.ok() ? "finished" : absl::StrCat("failed: ", status.message());
  }
  return status;
}

}  // namespace xhc::controller
