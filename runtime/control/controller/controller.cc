#include "runtime/control/controller/controller.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/hash.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/common/log.h"
#include "runtime/control/controller/saved_schedule.h"

namespace xhc::controller {
namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<Controller>> Controller::Create(const Config& config,
                                                               const ControllerOptions& options) {
  ASSIGN_OR_RETURN(plan::JobPlan plan, PlanForRun(config, options.workers, options.data_parallel,
                                                  options.run_dir, options.resume));
  auto c = std::unique_ptr<Controller>(new Controller(config, options, std::move(plan)));
  if (options.resume) {
    std::vector<std::string> warnings;
    const std::string root = (fs::path(options.run_dir) / "checkpoints").string();
    // Verify before any worker starts: a resumed job must not half-start.
    std::vector<std::string> candidates = CommittedStepDirs(root);
    absl::StatusOr<std::string> latest = LatestStepDir(root);
    if (latest.ok()) candidates.insert(candidates.begin(), *latest);
    for (const std::string& dir : candidates) {
      absl::StatusOr<Manifest> m = VerifyCheckpoint(dir);
      if (m.ok()) {
        c->start_step_ = m->step;
        c->resume_from_ = dir;
        break;
      }
      LogWarning("resume: skipping %s: %s", dir, m.status().message());
    }
    if (c->resume_from_.empty()) {
      return absl::NotFoundError(absl::StrCat("resume: no valid checkpoint under ", root));
    }
    LogInfo("resume: continuing from %s (step %d)", c->resume_from_, c->start_step_);
  }
  return c;
}

Controller::Controller(const Config& config, const ControllerOptions& options, plan::JobPlan plan)
    : config_(config), options_(options), plan_(std::move(plan)) {
  config_hash_ = ModelConfigHash(config_.model);
  job_id_ = absl::StrFormat(
      "job-%016x", Mix64(static_cast<uint64_t>(::getpid()) ^ static_cast<uint64_t>(time(nullptr))));
  total_steps_ = options.steps >= 0 ? options.steps : config.train.steps;
  world_size_ = plan_.world_size();
  workers_.resize(world_size_);
}

absl::StatusOr<proto::RegisterResponse> Controller::Register(const proto::RegisterRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!req.config_hash().empty() && req.config_hash() != config_hash_) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", req.worker_id(), " was started with a config whose model hash ",
                     req.config_hash(), " differs from the job's ", config_hash_));
  }
  if (req.world_size() > 0 && req.world_size() != world_size_) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", req.worker_id(), " was started as one of ", req.world_size(),
                     " workers, but this job has ", world_size_,
                     " (the launcher's task count must equal the controller's --workers x "
                     "--data-parallel)"));
  }
  int rank = -1;
  const int hint = req.rank_hint();
  if (hint >= 0 && hint < world_size_ && !workers_[hint].registered) rank = hint;
  for (int r = 0; rank < 0 && r < world_size_; ++r) {
    if (!workers_[r].registered) rank = r;
  }
  if (rank < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("worker ", req.worker_id(), " refused: the job already has its ", world_size_,
                     " workers (a new worker takes a rank only after that rank's worker dies)"));
  }
  Worker& w = workers_[rank];
  w.registered = true;
  w.attached = false;
  w.alive = false;
  ++w.epoch;
  w.worker_id = req.worker_id();
  w.address = req.advertise_address();
  w.pid = req.pid();
  w.last_beat = Clock::now();
  proto::RegisterResponse resp;
  resp.set_rank(rank);
  resp.set_world_size(world_size_);
  resp.set_config_yaml(config_.source_yaml);
  resp.set_config_hash(config_hash_);
  for (int s : plan_.StagesOf(plan_.PipelineRankOf(rank))) resp.add_stages(s);
  resp.set_data_parallel(plan_.data_parallel);
  resp.set_actions(plan::DescribeRankActions(plan_, rank));
  resp.set_schedule_csv(plan_.schedule_csv);
  resp.set_job_id(job_id_);
  resp.set_generation(generation_);
  resp.set_start_step(start_step_);
  resp.set_run_dir(options_.run_dir);
  resp.set_resume_from(resume_from_);
  resp.set_epoch(w.epoch);
  LogInfo("worker %s (pid %d, %s) registered as rank %d", req.worker_id(), req.pid(),
          req.advertise_address(), rank);
  cv_.notify_all();
  return resp;
}

void Controller::KvSet(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  kv_[key] = value;
  cv_.notify_all();
}

absl::StatusOr<std::vector<std::string>> Controller::KvGet(const std::vector<std::string>& keys,
                                                           double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  auto all_present = [&] {
    for (const std::string& k : keys) {
      if (!kv_.count(k)) return false;
    }
    return true;
  };
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  if (!cv_.wait_until(lock, deadline, [&] { return stopped_ || all_present(); }) || stopped_) {
    std::vector<std::string> missing;
    for (const std::string& k : keys) {
      if (!kv_.count(k)) missing.push_back(k);
    }
    return absl::DeadlineExceededError(absl::StrFormat(
        "rendezvous: keys [%s] not set within %.1f s", absl::StrJoin(missing, ", "), timeout_s));
  }
  std::vector<std::string> values;
  for (const std::string& k : keys) values.push_back(kv_[k]);
  return values;
}

absl::Status Controller::Attach(int rank, int64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("heartbeat stream for unknown rank ", rank,
                                                   " (the job has ", world_size_, ")"));
  }
  Worker& w = workers_[rank];
  if (!w.registered) {
    return absl::FailedPreconditionError(absl::StrCat(
        "heartbeat stream for rank ", rank, ", which has no registered worker: register first"));
  }
  if (epoch != w.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fenced: rank ", rank, " now belongs to worker ", w.worker_id, " (registration ", w.epoch,
        "); this stream's registration ", epoch, " was replaced"));
  }
  if (w.attached) {
    return absl::AlreadyExistsError(absl::StrCat("rank ", rank, " (worker ", w.worker_id,
                                                 ") already opened its heartbeat stream"));
  }
  w.attached = true;
  w.alive = true;
  w.last_beat = Clock::now();
  cv_.notify_all();
  return absl::OkStatus();
}

void Controller::Heartbeat(int rank, const proto::Heartbeat& beat, int64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= world_size_) return;
  Worker& w = workers_[rank];
  if (w.epoch != epoch) return;
  w.last_beat = Clock::now();
  w.progress = beat.progress();
}

void Controller::Detach(int rank, int64_t epoch, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  Worker& w = workers_[rank];
  if (w.epoch != epoch) return;  // a replaced worker's old stream
  if (w.alive && !stopped_ && !finished_) {
    LogWarning("worker rank %d (pid %d) lost: %s", rank, w.pid, why);
  }
  w.alive = false;
  w.lost_at = Clock::now();
  cv_.notify_all();
}

std::optional<proto::Command> Controller::NextCommand(int rank, int64_t epoch, double timeout_s,
                                                      bool* stale) {
  std::unique_lock<std::mutex> lock(mu_);
  Worker& w = workers_[rank];
  // Also wakes when the stream's own reader saw it close (Detach): its writer ends at once.
  cv_.wait_for(lock, std::chrono::duration<double>(timeout_s),
               [&] { return stopped_ || w.epoch != epoch || !w.alive || !w.outbox.empty(); });
  *stale = stopped_ || w.epoch != epoch;
  if (*stale || w.outbox.empty()) return std::nullopt;
  proto::Command c = w.outbox.front();
  w.outbox.pop_front();
  return c;
}

absl::Status Controller::Report(const proto::StepReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  if (report.rank() < 0 || report.rank() >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("report from unknown rank ", report.rank()));
  }
  if (report.kind_case() == proto::StepReport::KIND_NOT_SET) {
    return absl::InvalidArgumentError(
        absl::StrCat("report from rank ", report.rank(), " carries no result"));
  }
  const Worker& w = workers_[report.rank()];
  if (!w.registered || report.epoch() != w.epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "fenced: report for rank ", report.rank(), " from registration ", report.epoch(),
        ", but the rank belongs to ", w.registered ? w.worker_id : "no worker", " (registration ",
        w.epoch, ") now"));
  }
  if (report.generation() != generation_) return absl::OkStatus();  // from an aborted step
  if (report.has_step_result()) {
    // A step no job runs is a bad report, not a number to count from (a step of INT64_MAX
    // overflowed step_done below: controller_rpc_fuzzer).
    const int64_t step = report.step_result().step();
    if (step < 0 || step == std::numeric_limits<int64_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("rank ", report.rank(), ": a result for step ",
                                                     step, ", which no job runs"));
    }
  }
  const ReportKey key = KeyOf(report);
  if (!reports_.count({key, report.rank()})) {
    int pending = 0;
    for (const auto& [k, r] : reports_) pending += k.second == report.rank();
    if (pending >= kMaxPendingReportsPerRank) {
      return absl::ResourceExhaustedError(
          absl::StrCat("rank ", report.rank(), " already has ", pending,
                       " reports the controller has not asked for; refusing more"));
    }
  }
  if (report.has_step_result()) {
    workers_[report.rank()].step_done = report.step_result().step() + 1;
  }
  reports_[{key, report.rank()}] = report;
  cv_.notify_all();
  return absl::OkStatus();
}

proto::StatusResponse Controller::Status() {
  std::lock_guard<std::mutex> lock(mu_);
  proto::StatusResponse s;
  s.set_state(state_);
  s.set_step(current_step_);
  s.set_total_steps(total_steps_);
  s.set_loss(last_loss_);
  s.set_tokens_per_s(tokens_per_s_);
  const auto now = Clock::now();
  for (int r = 0; r < world_size_; ++r) {
    const Worker& w = workers_[r];
    s.add_workers(absl::StrFormat("rank %d: %s pid %d %s, last heartbeat %.1f s ago, progress %d",
                                  r, w.registered ? w.worker_id : "(not registered)", w.pid,
                                  w.alive ? "alive" : (w.attached ? "DEAD" : "not attached"),
                                  std::chrono::duration<double>(now - w.last_beat).count(),
                                  w.progress));
  }
  return s;
}

JobView Controller::View(int64_t steps_from, int64_t checkpoints_from) {
  std::lock_guard<std::mutex> lock(mu_);
  JobView v;
  v.job_id = job_id_;
  v.state = state_;
  v.schedule = plan_.schedule.type;
  v.residual = ResidualTypeName(config_.model.residual.type);
  v.num_workers = options_.workers;
  v.num_stages = plan_.schedule.num_stages;
  v.generation = generation_;
  v.restarts = restarts_used_;
  v.max_restarts = config_.fault.max_restarts;
  v.step = current_step_;
  v.total_steps = total_steps_;
  v.heartbeat_timeout_s = config_.fault.heartbeat_timeout_s;
  const auto now = Clock::now();
  for (int r = 0; r < options_.workers; ++r) {
    const Worker& w = workers_[r];
    WorkerView& out = v.workers.emplace_back();
    out.rank = r;
    out.worker_id = w.worker_id;
    out.host = w.address;
    out.pid = w.pid;
    out.heartbeat_age_s = std::chrono::duration<double>(now - w.last_beat).count();
    out.actions_done = w.progress;
    out.step = w.step_done;
    out.epoch = w.epoch;
    if (!w.registered) {
      out.health = "not registered";
    } else if (!w.attached) {
      out.health = "joining";
    } else if (!w.alive) {
      out.health = "dead";
    } else if (out.heartbeat_age_s > config_.fault.heartbeat_timeout_s) {
      out.health = "hung";
    } else {
      out.health = "alive";
    }
  }
  // A negative index counts from the end (-1: only the newest record).
  auto start = [](int64_t from, size_t size) {
    const int64_t n = static_cast<int64_t>(size);
    return std::clamp<int64_t>(from < 0 ? n + from : from, 0, n);
  };
  v.steps_from = start(steps_from, step_records_.size());
  v.checkpoints_from = start(checkpoints_from, checkpoint_records_.size());
  v.steps.assign(step_records_.begin() + v.steps_from, step_records_.end());
  v.checkpoints.assign(checkpoint_records_.begin() + v.checkpoints_from, checkpoint_records_.end());
  v.recoveries = recovery_records_;
  v.num_steps_recorded = step_records_.size();
  v.num_checkpoints_recorded = checkpoint_records_.size();
  v.spans_step = last_spans_step_;
  v.last_step_spans = last_spans_;
  v.last_step_span_ranks = last_span_ranks_;
  return v;
}

void Controller::WorkerProcessExited(int rank, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (rank < 0 || rank >= world_size_ || stopped_) return;
  if (!workers_[rank].registered || !workers_[rank].attached) {
    startup_failure_ = absl::StrCat("worker for rank ", rank, " exited before joining: ", why);
    cv_.notify_all();
  }
}

void Controller::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  cv_.notify_all();
}

void Controller::Broadcast(const proto::Command& command) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Worker& w : workers_) {
    w.outbox.push_back(command);
    w.outbox.back().set_generation(generation_);
  }
  cv_.notify_all();
}

std::vector<int> Controller::DeadOrHungRanks() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (int r = 0; r < world_size_; ++r) {
    const Worker& w = workers_[r];
    const double silent = std::chrono::duration<double>(Clock::now() - w.last_beat).count();
    if (!w.registered || !w.alive || silent > config_.fault.heartbeat_timeout_s) out.push_back(r);
  }
  return out;
}

absl::Status Controller::FirstDeadWorker() const {
  for (int r = 0; r < world_size_; ++r) {
    const Worker& w = workers_[r];
    if (w.attached && !w.alive) {
      return absl::UnavailableError(absl::StrFormat(
          "worker rank %d (%s, pid %d) died: its heartbeat stream closed %.3f s ago", r,
          w.worker_id, w.pid, std::chrono::duration<double>(Clock::now() - w.lost_at).count()));
    }
    const double silent = std::chrono::duration<double>(Clock::now() - w.last_beat).count();
    if (w.attached && silent > config_.fault.heartbeat_timeout_s) {
      return absl::UnavailableError(absl::StrFormat(
          "worker rank %d (%s, pid %d) hung: no heartbeat for %.1f s (fault.heartbeat_timeout "
          "%.1f s)",
          r, w.worker_id, w.pid, silent, config_.fault.heartbeat_timeout_s));
    }
  }
  return absl::OkStatus();
}

absl::Status Controller::WaitForWorkers() {
  std::unique_lock<std::mutex> lock(mu_);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options_.register_timeout_s));
  auto ready = [&] {
    for (const Worker& w : workers_) {
      if (!w.registered || !w.attached) return false;
    }
    return true;
  };
  while (!ready()) {
    if (stopped_) return absl::CancelledError("controller stopped");
    if (!startup_failure_.empty()) {
      const std::string why = startup_failure_;
      startup_failure_.clear();
      // At the job's start this is fatal (a bad install or config). During a recovery it is
      // one more lost worker (a replacement killed before it joined): recoverable.
      if (generation_ > 0) return absl::UnavailableError(why);
      return absl::FailedPreconditionError(why);
    }
    RETURN_IF_ERROR(FirstDeadWorker());
    cv_.wait_for(lock, std::chrono::milliseconds(200));
    if (Clock::now() >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < world_size_; ++r) {
        if (!workers_[r].registered || !workers_[r].attached) missing.push_back(r);
      }
      return absl::DeadlineExceededError(absl::StrFormat("ranks [%s] did not join within %.0f s",
                                                         absl::StrJoin(missing, ", "),
                                                         options_.register_timeout_s));
    }
  }
  state_ = "running";
  return absl::OkStatus();
}

Controller::ReportKey Controller::KeyOf(const proto::StepReport& report) {
  switch (report.kind_case()) {
    case proto::StepReport::kStepResult: return {report.kind_case(), report.step_result().step()};
    case proto::StepReport::kCheckpointResult:
      return {report.kind_case(), report.checkpoint_result().step()};
    default: return {report.kind_case(), report.generation()};
  }
}

namespace {

// "step 17", "the checkpoint of step 17", "the resume of generation 2": for messages.
std::string Describe(const Controller::ReportKey& key) {
  switch (key.kind) {
    case proto::StepReport::kStepResult: return absl::StrCat("step ", key.id);
    case proto::StepReport::kCheckpointResult:
      return absl::StrCat("the checkpoint of step ", key.id);
    default: return absl::StrCat("the resume of generation ", key.id);
  }
}

}  // namespace

absl::StatusOr<std::vector<proto::StepReport>> Controller::CollectReports(ReportKey key,
                                                                          double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    std::vector<proto::StepReport> got;
    for (int r = 0; r < world_size_; ++r) {
      auto it = reports_.find({key, r});
      if (it == reports_.end()) break;
      if (!it->second.error().empty()) {
        return absl::InternalError(
            absl::StrFormat("%s failed on rank %d: %s", Describe(key), r, it->second.error()));
      }
      got.push_back(it->second);
    }
    if (static_cast<int>(got.size()) == world_size_) {
      for (int r = 0; r < world_size_; ++r) reports_.erase({key, r});
      return got;
    }
    if (stopped_) return absl::CancelledError("controller stopped");
    RETURN_IF_ERROR(FirstDeadWorker());
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s did not finish within fault.step_timeout = %.0f s", Describe(key), timeout_s));
    }
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

}  // namespace xhc::controller
