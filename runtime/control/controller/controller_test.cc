// In-process, deterministic tests of Controller (controller.h) with scripted workers in
// threads: no gRPC, no processes, no data plane. Each FakeWorker speaks the controller's
// RPC logic directly (Register, Attach, Heartbeat, NextCommand, Report) and answers RUN_STEP
// with losses that are a known function of (step, micro-batch), CHECKPOINT with a real shard
// on disk, RESUME with a ready report. What the multi-process tests check through timing,
// these check exactly: the loss aggregation, stale reports, a worker dying mid-step, the
// ABORT/RESUME generation protocol and the step a recovery resumes from.
#include "runtime/control/controller/controller.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exact_format.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/checkpoint.h"

namespace xhc::controller {
namespace {
namespace fs = std::filesystem;

constexpr int kWorkers = 2;
constexpr int kMicrobatches = 4;

// A small 1f1b job on 2 ranks; fault timeouts short so a failure shows within a second.
Config TestConfig(int steps, int checkpoint_every) {
  const std::string yaml = absl::StrFormat(R"(
model:
  vocab_size: 256
  d_model: 32
  n_layers: 2
  n_heads: 2
  n_kv_heads: 1
  seq_len: 16
  residual:
    type: vanilla
train:
  steps: %d
  batch_size: 1
  microbatches: %d
  seed: 7
  eval_every: 0
pipeline:
  schedule: 1f1b
  workers: %d
checkpoint:
  every: %d
  keep: 5
  async: false
fault:
  heartbeat_timeout: 2
  step_timeout: 20
  max_restarts: 2
)",
                                           steps, kMicrobatches, kWorkers, checkpoint_every);
  absl::StatusOr<Config> c = ParseConfig(yaml);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// The loss a fake worker reports for micro-batch `mb` of `step`: exact in binary, distinct
// per (step, mb), so a misplaced or dropped report changes the aggregate.
double FakeLoss(int64_t step, int mb) { return 4.0 + 0.25 * mb - step / 64.0; }

std::string RunDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp ? tmp : "/tmp", "/", name);
  fs::remove_all(dir);
  return dir;
}

// One scripted worker: registers with a rank hint, then serves commands until SHUTDOWN (or
// until told to die, which closes its "stream" as a killed process would).
class FakeWorker {
 public:
  struct Script {
    int64_t die_at_step = -1;           // RUN_STEP of this step: Detach instead of reporting
    int64_t stale_report_at_step = -1;  // also send this step's report with generation - 1
  };

  FakeWorker(Controller* ctl, int rank_hint, Script script)
      : ctl_(ctl), hint_(rank_hint), script_(script), thread_([this] { Serve(); }) {}
  ~FakeWorker() { thread_.join(); }

  std::vector<proto::Command> commands() const {
    std::lock_guard<std::mutex> lock(mu_);
    return commands_;
  }
  bool died() const { return died_; }
  int64_t epoch() const { return epoch_; }  // its registration's (RegisterResponse.epoch)
  std::string error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  void Fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = why;
  }

  void Serve() {
    proto::RegisterRequest req;
    req.set_worker_id(absl::StrCat("fake-", hint_));
    req.set_rank_hint(hint_);
    absl::StatusOr<proto::RegisterResponse> resp = ctl_->Register(req);
    if (!resp.ok()) return Fail(std::string(resp.status().message()));
    rank_ = resp->rank();
    const int64_t epoch = resp->epoch();
    epoch_ = epoch;
    if (absl::Status s = ctl_->Attach(rank_, epoch); !s.ok()) {
      return Fail(std::string(s.message()));
    }
    std::atomic<bool> beating{true};
    std::thread heart([&] {
      while (beating) {
        proto::Heartbeat beat;
        beat.set_rank(rank_);
        ctl_->Heartbeat(rank_, beat, epoch);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    while (true) {
      bool stale = false;
      std::optional<proto::Command> cmd = ctl_->NextCommand(rank_, epoch, 0.2, &stale);
      if (stale) break;  // replaced or stopped
      if (!cmd) continue;
      {
        std::lock_guard<std::mutex> lock(mu_);
        commands_.push_back(*cmd);
      }
      if (cmd->kind() == proto::Command::SHUTDOWN) break;
      if (cmd->kind() == proto::Command::RUN_STEP && cmd->step() == script_.die_at_step && !died_) {
        died_ = true;
        break;
      }
      absl::Status s = Answer(*cmd);
      if (!s.ok()) Fail(std::string(s.message()));
    }
    beating = false;
    heart.join();
    ctl_->Detach(rank_, epoch, died_ ? "killed by the test" : "shutdown");
  }

  absl::Status Answer(const proto::Command& cmd) {
    proto::StepReport report;
    report.set_rank(rank_);
    report.set_generation(cmd.generation());
    report.set_epoch(epoch_);
    switch (cmd.kind()) {
      case proto::Command::RUN_STEP: {
        proto::StepResult* r = report.mutable_step_result();
        r->set_step(cmd.step());
        r->set_step_s(0.01);
        r->set_compute_s(0.008);
        // Rank r reports every kWorkers-th micro-batch from r: the controller must merge.
        for (int mb = rank_; mb < kMicrobatches; mb += kWorkers) {
          r->add_loss_microbatches(mb);
          r->add_losses(FakeLoss(cmd.step(), mb));
        }
        if (cmd.step() == script_.stale_report_at_step) {
          // A report from an aborted generation with wrong losses, sent alone first: were it
          // counted, the step would complete with it (the other rank reports at once), and
          // the genuine report sent after the pause would come too late.
          proto::StepReport old = report;
          old.set_generation(cmd.generation() - 1);
          for (int i = 0; i < old.step_result().losses_size(); ++i) {
            old.mutable_step_result()->set_losses(i, 1e6);
          }
          absl::Status s = ctl_->Report(old);
          if (!s.ok()) return s;
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
        }
        return ctl_->Report(report);
      }
      case proto::Command::CHECKPOINT: {
        // A real shard: the controller's commit verifies what it references.
        std::vector<float> values = {static_cast<float>(cmd.step()), static_cast<float>(rank_)};
        std::vector<TensorView> views = {{absl::StrCat("rank", rank_, ".w"), {2}, values.data()}};
        absl::StatusOr<ShardRecord> shard =
            WriteShard(cmd.checkpoint_dir(), absl::StrCat("rank", rank_, ".safetensors"), views);
        if (!shard.ok()) return shard.status();
        proto::CheckpointResult* r = report.mutable_checkpoint_result();
        r->set_step(cmd.step());
        proto::ShardInfo* info = r->add_shards();
        info->set_file(shard->file);
        info->set_bytes(shard->bytes);
        info->set_xxhash64(shard->xxhash64);
        for (const std::string& t : shard->tensors) info->add_tensors(t);
        return ctl_->Report(report);
      }
      case proto::Command::RESUME: report.mutable_ready(); return ctl_->Report(report);
      default:  // ABORT: nothing to tear down
        return absl::OkStatus();
    }
  }

  Controller* ctl_;
  int hint_;
  Script script_;
  int rank_ = -1;
  std::atomic<int64_t> epoch_{0};
  std::atomic<bool> died_{false};
  mutable std::mutex mu_;
  std::vector<proto::Command> commands_;
  std::string error_;
  std::thread thread_;  // last: starts after every other member is initialised
};

// The "microbatch_losses" lists of metrics.jsonl, in order.
std::vector<std::string> LossLines(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<std::string> out;
  std::string line;
  const std::string key = "\"microbatch_losses\": [";
  while (std::getline(in, line)) {
    const size_t at = line.find(key);
    if (at == std::string::npos) continue;
    out.push_back(line.substr(at + key.size(), line.find(']', at) - at - key.size()));
  }
  return out;
}

std::string ExpectedLosses(int64_t step) {
  std::vector<double> v;
  for (int mb = 0; mb < kMicrobatches; ++mb) v.push_back(FakeLoss(step, mb));
  return ExactList(v);
}

std::unique_ptr<Controller> MakeController(const Config& config, const std::string& run_dir) {
  ControllerOptions options;
  options.workers = kWorkers;
  options.run_dir = run_dir;
  options.quiet = true;
  options.register_timeout_s = 20;
  options.replace_timeout_s = 20;
  absl::StatusOr<std::unique_ptr<Controller>> ctl = Controller::Create(config, options);
  EXPECT_TRUE(ctl.ok()) << ctl.status();
  return ctl.ok() ? std::move(*ctl) : nullptr;
}

TEST(ControllerTest, MergesLossesFromEveryRankAndCommitsCheckpoints) {
  const std::string run_dir = RunDir("controller_merge");
  std::unique_ptr<Controller> ctl = MakeController(TestConfig(4, 2), run_dir);
  ASSERT_NE(ctl, nullptr);
  absl::Status status;
  {
    FakeWorker w1(ctl.get(), 1, {}), w0(ctl.get(), 0, {});
    status = ctl->Run();
    EXPECT_EQ(w0.error(), "");
    EXPECT_EQ(w1.error(), "");
  }
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<std::string> lines = LossLines(run_dir);
  ASSERT_EQ(lines.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(lines[s], ExpectedLosses(s)) << "step " << s + 1;
  absl::StatusOr<std::string> latest = LatestStepDir(run_dir + "/checkpoints");
  ASSERT_TRUE(latest.ok()) << latest.status();
  absl::StatusOr<Manifest> m = VerifyCheckpoint(*latest);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->step, 4);
  EXPECT_EQ(m->shards.size(), 2u);                                    // one per rank
  EXPECT_EQ(CommittedStepDirs(run_dir + "/checkpoints").size(), 2u);  // steps 2 and 4
}

TEST(ControllerTest, DropsReportsOfAnOlderGeneration) {
  const std::string run_dir = RunDir("controller_stale");
  std::unique_ptr<Controller> ctl = MakeController(TestConfig(3, 0), run_dir);
  ASSERT_NE(ctl, nullptr);
  absl::Status status;
  {
    FakeWorker::Script stale;
    stale.stale_report_at_step = 1;
    FakeWorker w0(ctl.get(), 0, stale), w1(ctl.get(), 1, {});
    status = ctl->Run();
  }
  ASSERT_TRUE(status.ok()) << status;
  const std::vector<std::string> lines = LossLines(run_dir);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], ExpectedLosses(1));  // not the 1e6 of the stale report
}

TEST(ControllerTest, RejectsReportsFromUnknownRanksOrWithoutAResult) {
  const std::string run_dir = RunDir("controller_bad_report");
  std::unique_ptr<Controller> ctl = MakeController(TestConfig(1, 0), run_dir);
  ASSERT_NE(ctl, nullptr);
  proto::StepReport r;
  r.set_rank(kWorkers);
  r.mutable_ready();
  EXPECT_TRUE(absl::IsInvalidArgument(ctl->Report(r)));
  r.set_rank(0);
  r.clear_kind();
  EXPECT_TRUE(absl::IsInvalidArgument(ctl->Report(r)));
}

// One rank, one registration, one stream: a stream for a rank nobody registered, for a
// registration that is not the rank's current one, or a second stream for one registration
// is refused; so is a report from a registration that is not current, and an endless run of
// reports nobody asked for is bounded.
TEST(ControllerTest, StreamsAndReportsNeedTheRanksCurrentRegistration) {
  std::unique_ptr<Controller> ctl = MakeController(TestConfig(1, 0), RunDir("controller_fence"));
  ASSERT_NE(ctl, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(ctl->Attach(0, 0)));
  EXPECT_TRUE(absl::IsInvalidArgument(ctl->Attach(kWorkers, 1)));
  EXPECT_TRUE(absl::IsInvalidArgument(ctl->Attach(-1, 1)));
  proto::RegisterRequest req;
  req.set_worker_id("w0");
  req.set_rank_hint(0);
  absl::StatusOr<proto::RegisterResponse> r = ctl->Register(req);
  ASSERT_TRUE(r.ok()) << r.status();
  const int64_t epoch = r->epoch();
  EXPECT_GT(epoch, 0);
  const absl::Status wrong = ctl->Attach(0, epoch + 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong)) << wrong;
  EXPECT_NE(wrong.message().find("fenced"), std::string::npos) << wrong;
  ASSERT_TRUE(ctl->Attach(0, epoch).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(ctl->Attach(0, epoch)));
  proto::StepReport report;
  report.set_rank(0);
  report.set_epoch(epoch + 1);
  report.mutable_ready();
  EXPECT_TRUE(absl::IsFailedPrecondition(ctl->Report(report)));
  report.set_epoch(epoch);
  // A step no job runs is refused, not counted from (INT64_MAX overflowed the count of steps
  // done: controller_rpc_fuzzer).
  for (int64_t bad : {int64_t{-1}, std::numeric_limits<int64_t>::max()}) {
    report.mutable_step_result()->set_step(bad);
    const absl::Status refused = ctl->Report(report);
    EXPECT_TRUE(absl::IsInvalidArgument(refused)) << bad << ": " << refused;
  }
  for (int step = 0; step < Controller::kMaxPendingReportsPerRank; ++step) {
    report.mutable_step_result()->set_step(step);
    ASSERT_TRUE(ctl->Report(report).ok()) << "report " << step;
  }
  report.mutable_step_result()->set_step(Controller::kMaxPendingReportsPerRank);
  const absl::Status flood = ctl->Report(report);
  EXPECT_TRUE(absl::IsResourceExhausted(flood)) << flood;
  report.mutable_step_result()->set_step(0);  // the same report again replaces its copy
  EXPECT_TRUE(ctl->Report(report).ok());
}

// A worker whose launcher (Slurm's task count, torchrun's WORLD_SIZE) started a job of
// another size is refused before it takes a rank; one of the right size, or one that does
// not know, is accepted.
TEST(ControllerTest, RefusesAWorkerStartedForAnotherWorldSize) {
  std::unique_ptr<Controller> ctl = MakeController(TestConfig(1, 0), RunDir("controller_world"));
  ASSERT_NE(ctl, nullptr);
  proto::RegisterRequest req;
  req.set_worker_id("w-three");
  req.set_rank_hint(-1);
  req.set_world_size(3);
  absl::StatusOr<proto::RegisterResponse> r = ctl->Register(req);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("worker w-three was started as one of 3 workers, but "
                                      "this job has 2"),
            std::string::npos)
      << r.status();
  req.set_world_size(kWorkers);
  r = ctl->Register(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank(), 0);  // the refused worker did not take rank 0
  req.set_world_size(0);
  r = ctl->Register(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rank(), 1);
}

// Rank 1 dies in step 3 (after the checkpoint of step 2): the controller aborts the
// generation, asks for a replacement, resumes every rank from step 2 in generation 1, and
// finishes with the same losses as a run without the failure.
TEST(ControllerTest, ReplacesAWorkerThatDiesMidStepAndResumesFromTheCheckpoint) {
  const std::string run_dir = RunDir("controller_recover");
  std::unique_ptr<Controller> ctl = MakeController(TestConfig(5, 2), run_dir);
  ASSERT_NE(ctl, nullptr);
  std::vector<int> restarted;
  std::vector<std::unique_ptr<FakeWorker>> replacements;
  std::mutex mu;
  ctl->SetRestartWorker([&](int rank) {
    std::lock_guard<std::mutex> lock(mu);
    restarted.push_back(rank);
    replacements.push_back(std::make_unique<FakeWorker>(ctl.get(), rank, FakeWorker::Script{}));
    return absl::OkStatus();
  });
  absl::Status status;
  std::vector<proto::Command> survivor_commands;
  {
    FakeWorker::Script dies;
    dies.die_at_step = 2;  // 0-based: the third step
    FakeWorker w0(ctl.get(), 0, {}), w1(ctl.get(), 1, dies);
    status = ctl->Run();
    survivor_commands = w0.commands();
    EXPECT_TRUE(w1.died());
    // The dead worker's registration is fenced out: were its process alive after all (a
    // link that came back), its stream and reports are refused, not a second rank 1.
    proto::StepReport late;
    late.set_rank(1);
    late.set_epoch(w1.epoch());
    late.set_generation(1);
    late.mutable_step_result()->set_step(4);
    const absl::Status refused = ctl->Report(late);
    EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
    EXPECT_NE(refused.message().find("fenced"), std::string::npos) << refused;
    const absl::Status reattach = ctl->Attach(1, w1.epoch());
    EXPECT_TRUE(absl::IsFailedPrecondition(reattach)) << reattach;
    EXPECT_NE(reattach.message().find("fake-1"), std::string::npos)
        << "names the worker the rank belongs to now: " << reattach;
    replacements.clear();  // joins the replacement (it saw SHUTDOWN)
  }
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(restarted, std::vector<int>{1});
  // The survivor saw: RESUME(gen 0), steps 0..2 (+checkpoint 2), ABORT, RESUME(gen 1) from
  // the step-2 checkpoint, steps 2..4 again in generation 1, SHUTDOWN.
  bool aborted = false;
  std::string resumed_from;
  std::vector<int64_t> gen1_steps;
  for (const proto::Command& c : survivor_commands) {
    if (c.kind() == proto::Command::ABORT && c.generation() == 1) aborted = true;
    if (c.kind() == proto::Command::RESUME && c.generation() == 1)
      resumed_from = c.checkpoint_dir();
    if (c.kind() == proto::Command::RUN_STEP && c.generation() == 1) gen1_steps.push_back(c.step());
    EXPECT_LE(c.generation(), 1);
  }
  EXPECT_TRUE(aborted);
  EXPECT_EQ(fs::path(resumed_from).filename().string(), StepDirName(2));
  EXPECT_EQ(gen1_steps, (std::vector<int64_t>{2, 3, 4}));
  // Steps 1, 2 once; step 3 only after the recovery (the failed attempt wrote nothing).
  const std::vector<std::string> lines = LossLines(run_dir);
  ASSERT_EQ(lines.size(), 5u);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(lines[s], ExpectedLosses(s)) << "step " << s + 1;
}

// The dashboard's and /metrics' records (View) are the very records metrics.jsonl was
// written from: every line is MetricsLine of one record, in order; the recovery is there
// with the rank replaced and the step rolled back to; a View from given indices returns
// only the newer records.
TEST(ControllerTest, ViewHoldsTheRecordsMetricsJsonlWasWrittenFrom) {
  const std::string run_dir = RunDir("controller_view");
  std::unique_ptr<Controller> ctl = MakeController(TestConfig(5, 2), run_dir);
  ASSERT_NE(ctl, nullptr);
  std::vector<std::unique_ptr<FakeWorker>> replacements;
  std::mutex mu;
  ctl->SetRestartWorker([&](int rank) {
    std::lock_guard<std::mutex> lock(mu);
    replacements.push_back(std::make_unique<FakeWorker>(ctl.get(), rank, FakeWorker::Script{}));
    return absl::OkStatus();
  });
  JobView before = ctl->View(0, 0);
  EXPECT_EQ(before.state, "waiting for workers");
  ASSERT_EQ(before.workers.size(), 2u);
  EXPECT_EQ(before.workers[1].health, "not registered");
  absl::Status status;
  {
    FakeWorker::Script dies;
    dies.die_at_step = 3;
    FakeWorker w0(ctl.get(), 0, {}), w1(ctl.get(), 1, dies);
    status = ctl->Run();
    replacements.clear();
  }
  ASSERT_TRUE(status.ok()) << status;
  const JobView v = ctl->View(0, 0);
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::vector<std::string> step_lines, ckpt_lines;
  for (std::string line; std::getline(in, line);) {
    (line.rfind("{\"checkpoint_step\"", 0) == 0 ? ckpt_lines : step_lines).push_back(line + "\n");
  }
  ASSERT_EQ(v.steps.size(), step_lines.size());
  ASSERT_EQ(v.steps.size(), 6u);  // 1..3, then 3..5 again after rolling back to 2
  for (size_t i = 0; i < v.steps.size(); ++i) EXPECT_EQ(MetricsLine(v.steps[i]), step_lines[i]);
  ASSERT_EQ(v.checkpoints.size(), ckpt_lines.size());
  for (size_t i = 0; i < v.checkpoints.size(); ++i) {
    EXPECT_EQ(MetricsLine(v.checkpoints[i]), ckpt_lines[i]);
  }
  ASSERT_EQ(v.recoveries.size(), 1u);
  EXPECT_EQ(v.recoveries[0].generation, 1);
  EXPECT_EQ(v.recoveries[0].failed_step, 4);
  EXPECT_EQ(v.recoveries[0].resumed_step, 2);
  EXPECT_EQ(v.recoveries[0].replaced_ranks, std::vector<int>{1});
  EXPECT_EQ(v.steps[2].generation, 0);
  EXPECT_EQ(v.steps[3].generation, 1);
  EXPECT_EQ(v.steps[3].step, 3);
  EXPECT_EQ(v.state, "finished");
  EXPECT_EQ(v.step, 5);
  EXPECT_EQ(v.generation, 1);
  EXPECT_EQ(v.restarts, 1);
  EXPECT_EQ(v.spans_step, 5);
  const JobView tail = ctl->View(4, 2);
  EXPECT_EQ(tail.steps_from, 4);
  ASSERT_EQ(tail.steps.size(), 2u);
  EXPECT_EQ(MetricsLine(tail.steps[0]), step_lines[4]);
  EXPECT_EQ(tail.checkpoints.size(), v.checkpoints.size() - 2);
  EXPECT_EQ(tail.num_steps_recorded, 6);
  const JobView newest = ctl->View(-1, -1);
  ASSERT_EQ(newest.steps.size(), 1u);
  EXPECT_EQ(newest.steps_from, 5);
  EXPECT_EQ(newest.steps[0].step, 5);
  ASSERT_EQ(newest.checkpoints.size(), 1u);
  EXPECT_EQ(newest.checkpoints[0].step, 5);
}

// Without a replacement the controller fails the job within the replace timeout and names
// the rank, instead of hanging.
TEST(ControllerTest, FailsClearlyWhenNoReplacementJoins) {
  const std::string run_dir = RunDir("controller_no_replacement");
  Config config = TestConfig(4, 0);
  ControllerOptions options;
  options.workers = kWorkers;
  options.run_dir = run_dir;
  options.quiet = true;
  options.replace_timeout_s = 1;
  absl::StatusOr<std::unique_ptr<Controller>> ctl = Controller::Create(config, options);
  ASSERT_TRUE(ctl.ok()) << ctl.status();
  absl::Status status;
  {
    FakeWorker::Script dies;
    dies.die_at_step = 1;
    FakeWorker w0(ctl->get(), 0, {}), w1(ctl->get(), 1, dies);
    status = (*ctl)->Run();
  }
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("ranks [1] did not join"), std::string::npos) << status;
}

}  // namespace
}  // namespace xhc::controller
