#include "runtime/worker/worker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "proto/xhc.grpc.pb.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/common/log.h"
#include "runtime/data/corpus.h"
#include "runtime/device/device_spec.h"
#include "runtime/plan/plan.h"
#include "runtime/train/model_io.h"
#include "runtime/train/trainer.h"
#include "runtime/transport/gloo_transport.h"
#include "runtime/worker/command_stream.h"
#include "runtime/worker/cpu_time.h"
#include "runtime/worker/grpc_kv_store.h"
#include "runtime/worker/shard_writer.h"
#include "runtime/worker/stage_executor.h"

namespace xhc::worker {
namespace {

absl::StatusOr<proto::RegisterResponse> RegisterWithRetry(proto::Controller::Stub* stub,
                                                          const WorkerOptions& o,
                                                          const std::string& config_hash) {
  proto::RegisterRequest req;
  req.set_worker_id(absl::StrCat(o.advertise_address, ":", ::getpid()));
  req.set_advertise_address(o.advertise_address);
  req.set_device(o.device);
  req.set_config_hash(config_hash);
  req.set_pid(::getpid());
  req.set_rank_hint(o.rank_hint);
  req.set_world_size(o.world_size);
  const absl::Time deadline = absl::Now() + absl::Seconds(o.connect_timeout_s);
  while (true) {
    grpc::ClientContext ctx;
    PrepareContext(&ctx, o.token, 10);
    proto::RegisterResponse resp;
    grpc::Status s = stub->Register(&ctx, req, &resp);
    if (s.ok()) return resp;
    // A controller not listening yet is worth waiting for; a refused TLS handshake is not.
    const std::string tls_failure = ExplainTlsFailure(s, o.tls);
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || !tls_failure.empty() ||
        absl::Now() > deadline) {
      std::string what = absl::StrCat("register with controller ", o.controller);
      if (o.world_size > 0) {
        absl::StrAppend(&what, " (world size ", o.world_size, " from ", o.world_from, ")");
      }
      absl::Status status = FromGrpc(s, what);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return status;
      return absl::UnavailableError(absl::StrCat(
          status.message(),
          tls_failure.empty() ? ExplainUnreachable(s, o.tls, o.connect_timeout_s) : tls_failure));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

// The assignment must match the plan this worker computes from the same config.
absl::StatusOr<plan::JobPlan> CheckAssignment(const Config& config,
                                              const proto::RegisterResponse& reg) {
  if (ModelConfigHash(config.model) != reg.config_hash()) {
    return absl::FailedPreconditionError("controller's config hash does not match its config");
  }
  // A CSV schedule comes with the assignment: this host need not have the file (or the
  // launch may have named it with --schedule-csv, outside the config).
  const int data_parallel = std::max(1, reg.data_parallel());
  if (reg.world_size() % data_parallel != 0) {
    return absl::FailedPreconditionError(absl::StrCat("controller's world of ", reg.world_size(),
                                                      " ranks is not ", data_parallel,
                                                      " equal replicas"));
  }
  const int pipeline_ranks = reg.world_size() / data_parallel;
  ASSIGN_OR_RETURN(plan::JobPlan plan,
                   reg.schedule_csv().empty()
                       ? plan::MakePlan(config, pipeline_ranks, data_parallel)
                       : plan::MakePlanFromCsv(config, pipeline_ranks, reg.schedule_csv(),
                                               "from the controller", data_parallel));
  const std::string mine = plan::DescribeRankActions(plan, reg.rank());
  if (mine != reg.actions()) {
    return absl::FailedPreconditionError(
        absl::StrCat("assignment for rank ", reg.rank(),
                     " differs from the plan computed from the config "
                     "(different xhc versions?)"));
  }
  return plan;
}

absl::Status LoadResume(const std::string& dir, StageExecutor* exec) {
  ASSIGN_OR_RETURN(LoadedCheckpoint ckpt, LoadCheckpoint(dir));
  for (auto& [s, ps] : exec->Stages()) {
    RETURN_IF_ERROR(train::LoadParams(ckpt.tensors, /*with_optim=*/true, ps));
  }
  LogInfo("loaded %s (step %d)", dir, ckpt.manifest.step);
  return absl::OkStatus();
}

proto::StepResult StepResultOf(int64_t step, const StepOutcome& o) {
  proto::StepResult r;
  r.set_step(step);
  for (const auto& [mb, loss] : o.losses) {
    r.add_loss_microbatches(mb);
    r.add_losses(loss);
  }
  for (double v : o.val_losses) r.add_val_losses(v);
  r.set_step_s(o.step_s);
  r.set_compute_s(o.compute_s);
  r.set_comm_wait_s(o.comm_wait_s);
  r.set_peer_wait_s(o.peer_wait_s);
  r.set_grad_norm(o.grad_norm);
  r.set_replica_grad_wait_s(o.replica_reduce_wait_s);
  for (const proto::Span& s : o.spans) *r.add_spans() = s;
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0) r.set_peak_rss_bytes(usage.ru_maxrss * 1024LL);
  return r;
}

// One generation of the data plane: transport + executor, rebuilt after every failure.
struct DataPlane {
  std::unique_ptr<GlooTransport> transport;
  std::unique_ptr<device::Device> device;  // null on `--device cpu`
  std::unique_ptr<StageExecutor> exec;     // destroyed first: it uses both
  void Reset() {
    exec.reset();
    device.reset();  // a device an aborted step failed (sticky) is made afresh
    transport.reset();
  }
};

absl::Status BuildDataPlane(const proto::Command& cmd, const proto::RegisterResponse& reg,
                            const WorkerOptions& o, const Config& config, const plan::JobPlan& plan,
                            const Corpus& corpus, KvStore* kv, DataPlane* dp) {
  GlooTransportOptions topts;
  topts.rank = reg.rank();
  topts.world_size = reg.world_size();
  topts.hostname = o.advertise_address;
  topts.store_prefix = absl::StrCat(reg.job_id(), "/gen", cmd.generation(), "/");
  topts.connect_timeout = absl::Seconds(config.fault.step_timeout_s);
  ASSIGN_OR_RETURN(dp->transport, GlooTransport::Create(topts, kv));
  ASSIGN_OR_RETURN(dp->device, device::MakeDevice(o.device));
  dp->exec = std::make_unique<StageExecutor>(config, plan, reg.rank(), dp->transport.get(), &corpus,
                                             dp->device.get());
  if (!cmd.checkpoint_dir().empty()) {
    RETURN_IF_ERROR(LoadResume(cmd.checkpoint_dir(), dp->exec.get()));
  }
  return absl::OkStatus();
}

// A registered worker's life under the controller's commands, until SHUTDOWN: its data plane
// (built on RESUME, torn down on ABORT), its steps and its checkpoint shards.
class CommandLoop {
 public:
  CommandLoop(proto::Controller::Stub* stub, const WorkerOptions& o,
              const proto::RegisterResponse& reg, const Config& config, const plan::JobPlan& plan,
              const Corpus& corpus)
      : o_(o),
        reg_(reg),
        config_(config),
        plan_(plan),
        corpus_(corpus),
        rank_(reg.rank()),
        kv_(stub, o.token),
        commands_(stub, o.token, reg.rank(), reg.epoch()) {}

  absl::Status Run() {
    // An ABORT must interrupt a step blocked on a dead peer: the reader thread fails the
    // transport at once, and the loop tears the data plane down when it sees the command.
    // The newest generation the controller has announced: a RESUME for an older one is stale.
    commands_.SetCommandHook([this](const proto::Command& cmd) {
      if (cmd.generation() > latest_generation_.load()) latest_generation_ = cmd.generation();
      if (cmd.kind() != proto::Command::ABORT) return;
      std::lock_guard<std::mutex> lock(dp_mu_);
      if (dp_.transport) dp_.transport->Abort();
    });
    commands_.SetProgressSource([this]() -> int64_t { return progress_.load(); });
    RETURN_IF_ERROR(commands_.Open());
    ShardWriter shards([this](const proto::StepReport& r) {
      absl::Status s = commands_.Report(r);
      if (!s.ok()) LogWarning("checkpoint report: %s", s.message());
    });
    const std::vector<int> stages = plan_.StagesOf(plan_.PipelineRankOf(rank_));
    LogInfo("registered: stages [%s], %s, layers [%s]%s%s", absl::StrJoin(stages, ", "),
            plan_.schedule.type, plan::DescribeStageLayers(plan_, stages),
            plan_.data_parallel > 1
                ? absl::StrFormat(", replica %d of %d", plan_.ReplicaOf(rank_), plan_.data_parallel)
                : std::string(),
            o_.device == "cpu" ? std::string() : ", device " + o_.device);
    while (true) {
      ASSIGN_OR_RETURN(proto::Command cmd, commands_.Next());
      proto::StepReport report;
      report.set_rank(rank_);
      report.set_generation(cmd.generation());
      switch (cmd.kind()) {
        case proto::Command::SHUTDOWN: LogSameHostTotal(); return absl::OkStatus();
        case proto::Command::ABORT: TearDown(); continue;
        case proto::Command::RESUME:
          if (!Resume(cmd, &report)) continue;
          break;
        case proto::Command::RUN_STEP:
          if (!dp_.exec) continue;
          RunStep(cmd, &report);
          break;
        case proto::Command::CHECKPOINT:
          // The shard's report is sent by the writer when the shard is durable.
          if (dp_.exec) shards.Start(cmd, rank_, dp_.exec.get(), config_.checkpoint.async);
          continue;
        default: continue;
      }
      if (dp_.exec) progress_ = dp_.exec->actions_done();
      RETURN_IF_ERROR(commands_.Report(report));
    }
  }

 private:
  void TearDown() {
    std::lock_guard<std::mutex> lock(dp_mu_);
    ResetDataPlane();
    LogWarning("step aborted by the controller; data plane torn down");
  }

  // Under dp_mu_. Keeps the count of the messages the torn-down transport took over the
  // same-host path, for the line at shutdown.
  void ResetDataPlane() {
    if (dp_.transport) same_host_received_ += dp_.transport->same_host_received();
    dp_.Reset();
  }

  // The job's evidence of which path the states took: a shaped launch (same-host copy off)
  // must show 0 here (docs/design/shaped-links.md).
  // The data plane stays: an asynchronous checkpoint shard may still be reading it.
  void LogSameHostTotal() {
    std::lock_guard<std::mutex> lock(dp_mu_);
    LogInfo("transport: rank %d: %d messages received over the same-host path", rank_,
            same_host_received_ + (dp_.transport ? dp_.transport->same_host_received() : 0));
  }

  // A new data plane for the command's generation; false where a newer generation has been
  // announced already (nothing to report).
  bool Resume(const proto::Command& cmd, proto::StepReport* report) {
    {
      std::lock_guard<std::mutex> lock(dp_mu_);
      ResetDataPlane();
    }
    if (cmd.generation() < latest_generation_.load()) return false;  // superseded already
    // Built outside the lock (the rendezvous can take a while), then published. A newer
    // generation announced meanwhile abandons this rendezvous.
    const int gen = cmd.generation();
    kv_.SetCancelled([this, gen] { return latest_generation_.load() > gen; });
    DataPlane fresh;
    absl::Status s = BuildDataPlane(cmd, reg_, o_, config_, plan_, corpus_, &kv_, &fresh);
    {
      std::lock_guard<std::mutex> lock(dp_mu_);
      dp_.transport = std::move(fresh.transport);
      dp_.device = std::move(fresh.device);
      dp_.exec = std::move(fresh.exec);
    }
    report->mutable_ready();
    if (!s.ok()) report->set_error(std::string(s.message()));
    return true;
  }

  void RunStep(const proto::Command& cmd, proto::StepReport* report) {
    commands_.SetStep(cmd.step());
    const CpuTimes cpu0 = ReadCpuTimes();
    absl::StatusOr<StepOutcome> out =
        dp_.exec->RunStep(cmd.step(), cmd.total_steps(), cmd.evaluate());
    if (out.ok()) {
      *report->mutable_step_result() = StepResultOf(cmd.step(), *out);
      report->mutable_step_result()->set_other_threads_cpu_s(OtherThreadsCpu(cpu0, ReadCpuTimes()));
    } else {
      // Stay up: the controller decides (abort + resume, or give up).
      report->mutable_step_result()->set_step(cmd.step());
      report->set_error(std::string(out.status().message()));
      LogWarning("step %d failed: %s", cmd.step(), out.status().message());
    }
  }

  const WorkerOptions& o_;
  const proto::RegisterResponse& reg_;
  const Config& config_;
  const plan::JobPlan& plan_;
  const Corpus& corpus_;
  const int rank_;
  GrpcKvStore kv_;
  DataPlane dp_;
  std::mutex dp_mu_;  // guards dp_.transport against the reader thread's Abort
  std::atomic<int> latest_generation_{0};
  std::atomic<int64_t> progress_{0};  // actions executed, updated after every command
  uint64_t same_host_received_ = 0;   // guarded by dp_mu_: of every transport torn down
  CommandStream commands_;            // last: its reader thread uses the members above
};

}  // namespace

absl::Status RunWorker(const WorkerOptions& o) {
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, MakeChannel(o.controller, o.tls));
  auto stub = proto::Controller::NewStub(channel);
  std::string my_hash;
  if (!o.config_path.empty()) {
    ASSIGN_OR_RETURN(Config mine, LoadConfigFile(o.config_path));
    my_hash = ModelConfigHash(mine.model);
  }
  ASSIGN_OR_RETURN(proto::RegisterResponse reg, RegisterWithRetry(stub.get(), o, my_hash));
  SetLogTag(absl::StrCat("rank ", reg.rank()));
  ASSIGN_OR_RETURN(Config config, ParseConfig(reg.config_yaml()));
  ASSIGN_OR_RETURN(plan::JobPlan plan, CheckAssignment(config, reg));
  ASSIGN_OR_RETURN(Corpus corpus, LoadTrainingCorpus(config));
  CommandLoop loop(stub.get(), o, reg, config, plan, corpus);
  return loop.Run();
}

}  // namespace xhc::worker
