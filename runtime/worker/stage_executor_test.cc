// StageExecutor in one process, deterministically: every rank of a pipeline is a thread over
// FakeTransport (which keeps gloo's contract: tagged, ordered matching, counts checked, first
// failure fails the transport). For every schedule and rank count the per-micro-batch losses
// and every parameter after several steps are bit-identical to the same job on one rank (so
// are uneven stages, an end stage holding no layer included);
// a rank whose peer fails mid-step gets an error (kUnavailable), not a hang; the step-end
// gradient norm is one exchange, its receives posted when a step starts; DualPipe posts its
// mirror-gradient receives when a step starts and sends its sums during the last weight pass.
#include "runtime/worker/stage_executor.h"

#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/config.h"
#include "runtime/data/corpus.h"
#include "runtime/plan/plan.h"
#include "runtime/transport/fake_transport.h"
#include "runtime/worker/pipeline_test_util.h"

namespace xhc::worker {
namespace {

struct Case {
  std::string schedule;
  int ranks;
  int chunks = 1;
  std::string stage_layers = "";  // uneven stages; "" = the even split
  int data_parallel = 1;
};

class StageExecutorTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StageExecutorTest, EveryScheduleMatchesOneRankBitForBit) {
  const std::string residual = GetParam();
  const RunResult want = RunPipeline(MakeConfig(residual, "1f1b", 1), 1);
  for (const absl::Status& e : want.errors) ASSERT_TRUE(e.ok()) << e;
  ASSERT_EQ(want.losses[0].size(), 8u);
  for (const Case& c :
       std::vector<Case>{{"gpipe", 2},
                         {"gpipe", 4},
                         {"1f1b", 2},
                         {"1f1b", 4},
                         {"interleaved1f1b", 2, 2},
                         {"zb1p", 2},
                         {"zb1p", 4},
                         {"dualpipe", 2},
                         {"dualpipe", 4},
                         {"dualpipev", 2},
                         {"dualpipev", 4},
                         // Uneven stages, ends with no layer included.
                         {"1f1b", 4, 1, "first_stage_layers: 0, last_stage_layers: 3"},
                         {"dualpipev", 2, 1, "first_stage_layers: 3, last_stage_layers: 0"},
                         {"zb1p", 2, 1, "first_stage_layers: 1"}}) {
    SCOPED_TRACE(
        absl::StrCat(residual, " ", c.schedule, " on ", c.ranks, " ranks ", c.stage_layers));
    const RunResult got =
        RunPipeline(MakeConfig(residual, c.schedule, c.chunks, c.stage_layers), c.ranks);
    for (const absl::Status& e : got.errors) ASSERT_TRUE(e.ok()) << e;
    ExpectSameRun(want, got);
  }
}

// D replicas of every kind of pipeline (mirrored DualPipe, V-shaped, split W, looped) give
// the one-rank job's losses and weights, and all replicas hold the same weights.
TEST(StageExecutorDataParallelTest, ReplicatedPipelinesMatchOneRankBitForBit) {
  const std::string residual =
      "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: [2]}";
  const RunResult want = RunPipeline(MakeConfig(residual, "1f1b", 1), 1);
  for (const absl::Status& e : want.errors) ASSERT_TRUE(e.ok()) << e;
  for (const Case& c : std::vector<Case>{{"1f1b", 1, 1, "", 2},
                                         {"1f1b", 2, 1, "", 2},
                                         {"zb1p", 2, 1, "", 2},
                                         {"dualpipe", 2, 1, "", 2},
                                         {"dualpipev", 2, 1, "", 2},
                                         {"interleaved1f1b", 2, 2, "", 2},
                                         {"1f1b", 1, 1, "", 4},
                                         {"1f1b", 2, 1, "", 4},
                                         {"gpipe", 1, 1, "", 8}}) {
    SCOPED_TRACE(
        absl::StrCat(c.schedule, " on ", c.ranks, " ranks x ", c.data_parallel, " replicas"));
    const RunResult got =
        RunPipeline(MakeConfig(residual, c.schedule, c.chunks), c.ranks, c.data_parallel);
    for (const absl::Status& e : got.errors) ASSERT_TRUE(e.ok()) << e;
    EXPECT_TRUE(got.replica_mismatches.empty()) << got.replica_mismatches.front();
    ExpectSameRun(want, got);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Residuals, StageExecutorTest,
    ::testing::Values("{type: vanilla}",
                      "{type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: [2]}",
                      "{type: xhc_flash, window: 2, n_streams: 6, n_active: 3, n_fixed: 1}"),
    [](const auto& info) { return std::to_string(info.index); });

// A peer that fails in the middle of a step (its transport aborted) makes the other rank's
// step fail with kUnavailable instead of waiting forever.
TEST(StageExecutorFailureTest, PeerFailingMidStepIsAnErrorNotAHang) {
  const Config config = MakeConfig("{type: vanilla}", "1f1b", 1);
  absl::StatusOr<plan::JobPlan> plan = plan::MakePlan(config, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Corpus corpus = MakeCorpus();
  auto world = FakeTransport::CreateWorld(2);
  StageExecutor survivor(config, *plan, 0, world[0].get(), &corpus);
  absl::StatusOr<StepOutcome> result;
  std::thread t([&] { result = survivor.RunStep(0, kSteps, false); });
  world[1]->Abort();  // rank 1 dies before sending anything
  t.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
}

// Every send a rank posts is a `send` span on the communication track (exposed
// communication: the time the compute thread spent in Isend), one per output that leaves the
// rank: 1f1b on 2 ranks sends each micro-batch's activation one way and its gradient back.
TEST(StageExecutorSpansTest, EverySendPostIsACommunicationSpan) {
  const Config config = MakeConfig("{type: vanilla}", "1f1b", 1);
  absl::StatusOr<plan::JobPlan> plan = plan::MakePlan(config, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Corpus corpus = MakeCorpus();
  auto world = FakeTransport::CreateWorld(2);
  std::vector<std::unique_ptr<StageExecutor>> execs;
  for (int r = 0; r < 2; ++r) {
    execs.push_back(std::make_unique<StageExecutor>(config, *plan, r, world[r].get(), &corpus));
  }
  std::vector<absl::StatusOr<StepOutcome>> out(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { out[r] = execs[r]->RunStep(0, kSteps, false); });
  }
  for (auto& t : threads) t.join();
  const int microbatches = config.train.microbatches;
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status();
    const std::string prefix = r == 0 ? "send F0." : "send B1.";
    int sends = 0;
    double send_s = 0;
    for (const proto::Span& span : out[r]->spans) {
      if (span.name().rfind("send ", 0) != 0) continue;
      EXPECT_EQ(span.name().rfind(prefix, 0), 0u) << "rank " << r << ": " << span.name();
      EXPECT_EQ(span.track(), 1) << span.name();  // communication
      ++sends;
      send_s += span.dur_us() * 1e-6;
    }
    EXPECT_EQ(sends, microbatches) << "rank " << r;
    EXPECT_GE(out[r]->comm_wait_s, send_s) << "rank " << r;
  }
}

// Records what a rank posts (point to point: send or receive, the tag's kind and stage, and
// when, in order)
// and counts its collectives; everything goes on to the wrapped transport.
class RecordingTransport : public Transport {
 public:
  struct Post {
    bool is_send;
    TagKind kind;
    int stage;       // the tag's
    double unix_us;  // when posted (span clock)
  };
  // A request whose post copied the payload for `copy` (Transport::Irecv's contract).
  class PostCopiedRequest : public Request {
   public:
    PostCopiedRequest(std::unique_ptr<Request> inner, absl::Duration copy)
        : inner_(std::move(inner)), copy_(copy) {}
    absl::Status Wait(absl::Duration timeout) override { return inner_->Wait(timeout); }
    absl::Duration PostCopyTime() const override { return copy_; }

   private:
    std::unique_ptr<Request> inner_;
    absl::Duration copy_;
  };
  explicit RecordingTransport(Transport* inner) : inner_(inner) {}
  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  absl::StatusOr<std::unique_ptr<Request>> Isend(int peer, uint64_t tag, const float* data,
                                                 size_t count) override {
    Record(true, tag);
    return inner_->Isend(peer, tag, data, count);
  }
  absl::StatusOr<std::unique_ptr<Request>> Irecv(int peer, uint64_t tag, float* data,
                                                 size_t count) override {
    Record(false, tag);
    if (recv_post_delay == absl::ZeroDuration()) return inner_->Irecv(peer, tag, data, count);
    // A post that does work (as GlooTransport's same-host path does when the payload came
    // before its receive), where recv_post_delay is set, and says so (PostCopyTime).
    const absl::Time start = absl::Now();
    absl::SleepFor(recv_post_delay);
    absl::StatusOr<std::unique_ptr<Request>> inner = inner_->Irecv(peer, tag, data, count);
    if (!inner.ok()) return inner.status();
    return std::unique_ptr<Request>(
        std::make_unique<PostCopiedRequest>(*std::move(inner), absl::Now() - start));
  }
  absl::Status AllReduceSum(double* data, size_t count, absl::Duration timeout) override {
    ++collectives;
    return inner_->AllReduceSum(data, count, timeout);
  }
  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override {
    ++collectives;
    return inner_->AllReduceSum(data, count, timeout);
  }
  absl::Status Barrier(absl::Duration timeout) override {
    ++collectives;
    return inner_->Barrier(timeout);
  }
  void Abort() override { inner_->Abort(); }

  int collectives = 0;
  std::vector<Post> posts;
  absl::Duration recv_post_delay = absl::ZeroDuration();

 private:
  void Record(bool is_send, uint64_t tag) {
    absl::StatusOr<TagParts> parts = DecodeTag(tag);
    EXPECT_TRUE(parts.ok()) << parts.status();
    if (parts.ok()) {
      posts.push_back({is_send, parts->kind, parts->stage_idx,
                       absl::ToDoubleMicroseconds(absl::Now() - absl::UnixEpoch())});
    }
  }
  Transport* inner_;
};

// Runs one step of `ranks` executors, each behind a RecordingTransport.
struct RecordedStep {
  std::vector<std::unique_ptr<RecordingTransport>> transports;
  std::vector<absl::StatusOr<StepOutcome>> out;
};
RecordedStep RunRecordedStep(const Config& config, int pipeline_ranks, int replicas = 1) {
  RecordedStep r;
  absl::StatusOr<plan::JobPlan> plan = plan::MakePlan(config, pipeline_ranks, replicas);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return r;
  const int ranks = plan->world_size();
  const Corpus corpus = MakeCorpus();
  auto world = FakeTransport::CreateWorld(ranks);
  std::vector<std::unique_ptr<StageExecutor>> execs;
  for (int i = 0; i < ranks; ++i) {
    r.transports.push_back(std::make_unique<RecordingTransport>(world[i].get()));
    execs.push_back(
        std::make_unique<StageExecutor>(config, *plan, i, r.transports[i].get(), &corpus));
  }
  r.out.assign(ranks, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < ranks; ++i) {
    threads.emplace_back([&, i] { r.out[i] = execs[i]->RunStep(0, kSteps, false); });
  }
  for (auto& t : threads) t.join();
  return r;
}

// A receive's post that takes a while is communication the compute thread spent (a
// "post recv" span on the communication track), one per receive; quick posts make no span.
TEST(StageExecutorSpansTest, SlowReceivePostsAreCommunicationSpans) {
  const Config config = MakeConfig("{type: vanilla}", "1f1b", 1);
  absl::StatusOr<plan::JobPlan> plan = plan::MakePlan(config, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const Corpus corpus = MakeCorpus();
  auto world = FakeTransport::CreateWorld(2);
  std::vector<std::unique_ptr<RecordingTransport>> transports;
  std::vector<std::unique_ptr<StageExecutor>> execs;
  for (int r = 0; r < 2; ++r) {
    transports.push_back(std::make_unique<RecordingTransport>(world[r].get()));
    if (r == 1) transports[r]->recv_post_delay = absl::Milliseconds(2);
    execs.push_back(
        std::make_unique<StageExecutor>(config, *plan, r, transports[r].get(), &corpus));
  }
  std::vector<absl::StatusOr<StepOutcome>> out(2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { out[r] = execs[r]->RunStep(0, kSteps, false); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(out[r].ok()) << out[r].status();
    int posts = 0;
    double post_s = 0;
    for (const proto::Span& span : out[r]->spans) {
      if (span.name().rfind("post recv ", 0) != 0) continue;
      EXPECT_EQ(span.track(), 1) << span.name();  // communication
      post_s += span.dur_us() * 1e-6;
      if (span.dur_us() < 2000) continue;  // an undelayed post the machine happened to slow
      EXPECT_EQ(span.name().rfind("post recv F1.", 0), 0u) << "rank " << r << ": " << span.name();
      ++posts;
    }
    // Rank 1 receives each micro-batch's activation; rank 0's posts were not delayed.
    EXPECT_EQ(posts, r == 1 ? config.train.microbatches : 0) << "rank " << r;
    EXPECT_GE(out[r]->comm_wait_s, post_s) << "rank " << r;
  }
}

// The step-end gradient norm: on up to 8 ranks one message from every other rank (no
// collective), on more one all-reduce; either way every rank gets the same norm, the norm
// of the whole model (the one-rank run's up to the order of the additions).
TEST(StageExecutorGradNormTest, EveryRankGetsTheWholeModelsNormFromOneExchange) {
  const Config config = MakeConfig("{type: xhc}", "1f1b", 1);
  std::vector<double> norms;
  for (const auto& [ranks, replicas] : std::vector<std::pair<int, int>>{{1, 1}, {4, 1}, {8, 2}}) {
    RecordedStep r = RunRecordedStep(config, ranks, replicas);
    const int world = ranks * replicas;
    ASSERT_EQ(r.out.size(), static_cast<size_t>(world));
    for (int i = 0; i < world; ++i) {
      ASSERT_TRUE(r.out[i].ok()) << r.out[i].status();
      int sends = 0, recvs = 0;
      for (const auto& p : r.transports[i]->posts) {
        if (p.kind == TagKind::kGradNorm) ++(p.is_send ? sends : recvs);
      }
      const bool direct = world > 1 && world <= 8;
      EXPECT_EQ(sends, direct ? world - 1 : 0) << world << " ranks, rank " << i;
      EXPECT_EQ(recvs, direct ? world - 1 : 0) << world << " ranks, rank " << i;
      EXPECT_EQ(r.transports[i]->collectives, direct || world == 1 ? 0 : 1)
          << world << " ranks, rank " << i;
      EXPECT_EQ(r.out[i]->grad_norm, r.out[0]->grad_norm) << world << " ranks, rank " << i;
    }
    norms.push_back(r.out[0]->grad_norm);
  }
  EXPECT_GT(norms[0], 0);
  EXPECT_NEAR(norms[1], norms[0], 1e-12 * norms[0]);
  EXPECT_NEAR(norms[2], norms[0], 1e-12 * norms[0]);
}

// The norm's receives are posted when the step starts (a receive posted at the end adds a
// round trip to every rank's wait), after the mirror receives.
TEST(StageExecutorGradNormTest, NormReceivesArePostedWhenTheStepStarts) {
  for (const char* schedule : {"1f1b", "dualpipe"}) {
    RecordedStep r = RunRecordedStep(MakeConfig("{type: xhc}", schedule, 1), 2);
    ASSERT_EQ(r.out.size(), 2u);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(r.out[i].ok()) << r.out[i].status();
      const auto& posts = r.transports[i]->posts;
      size_t first_other = 0;  // the first post that is not a mirror receive
      while (first_other < posts.size() && !posts[first_other].is_send &&
             posts[first_other].kind == TagKind::kMirrorGradient) {
        ++first_other;
      }
      ASSERT_LT(first_other, posts.size());
      EXPECT_FALSE(posts[first_other].is_send) << schedule << " rank " << i;
      EXPECT_EQ(posts[first_other].kind, TagKind::kGradNorm) << schedule << " rank " << i;
    }
  }
}

// DualPipe's mirror-gradient receives are posted before anything else in the step (gloo
// moves a message only once its receive is posted: posted at REDUCE_GRAD, the replica's sums
// waited behind this rank's last weight pass), one per parameter of each held stage, and the
// sends follow later, during the stage's last weight pass.
TEST(StageExecutorMirrorTest, MirrorReceivesArePostedWhenTheStepStarts) {
  const Config config = MakeConfig("{type: xhc}", "dualpipe", 1);
  RecordedStep r = RunRecordedStep(config, 2);
  ASSERT_EQ(r.out.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(r.out[i].ok()) << r.out[i].status();
    const std::vector<RecordingTransport::Post>& posts = r.transports[i]->posts;
    size_t leading = 0;  // mirror receives before the first other post
    while (leading < posts.size() && !posts[leading].is_send &&
           posts[leading].kind == TagKind::kMirrorGradient) {
      ++leading;
    }
    size_t mirror_recvs = 0, mirror_sends = 0;
    for (const auto& p : posts) {
      if (p.kind != TagKind::kMirrorGradient) continue;
      ++(p.is_send ? mirror_sends : mirror_recvs);
    }
    EXPECT_GT(mirror_recvs, 0u) << "rank " << i;
    EXPECT_EQ(leading, mirror_recvs) << "rank " << i << ": a mirror receive posted mid-step";
    EXPECT_EQ(mirror_sends, mirror_recvs) << "rank " << i;
  }
}

// A stage's mirror sums leave while its last weight pass still runs, each group of
// parameters as soon as its sums are final (not all at REDUCE_GRAD after the pass): the
// first send of each mirrored stage is posted after that pass started and before it ended,
// and every send of the stage by its end.
TEST(StageExecutorMirrorTest, MirrorSumsLeaveDuringTheLastWeightPass) {
  const Config config = MakeConfig("{type: xhc}", "dualpipe", 1);
  RecordedStep r = RunRecordedStep(config, 2);
  ASSERT_EQ(r.out.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(r.out[i].ok()) << r.out[i].status();
    std::map<int, std::pair<double, double>> last_w;  // stage -> (start, end) of its last W
    for (const proto::Span& span : r.out[i]->spans) {
      if (span.name().empty() || span.name()[0] != 'W') continue;
      const int stage = std::stoi(span.name().substr(1));
      const double end = span.start_us() + span.dur_us();
      if (last_w.count(stage) == 0 || end > last_w[stage].second) {
        last_w[stage] = {span.start_us(), end};
      }
    }
    std::map<int, std::pair<double, double>> sends;  // stage -> (first, last) post
    for (const auto& p : r.transports[i]->posts) {
      if (!p.is_send || p.kind != TagKind::kMirrorGradient) continue;
      auto [it, fresh] = sends.try_emplace(p.stage, p.unix_us, p.unix_us);
      it->second.second = p.unix_us;
    }
    ASSERT_EQ(sends.size(), 2u) << "rank " << i << ": both stages are mirrored at R = 2";
    for (const auto& [stage, posted] : sends) {
      ASSERT_TRUE(last_w.count(stage)) << "rank " << i << " stage " << stage;
      const auto [w_start, w_end] = last_w[stage];
      // Span times are whole microseconds at the start: 2 us of slack either way.
      EXPECT_GE(posted.first, w_start - 2) << "rank " << i << " stage " << stage;
      EXPECT_LT(posted.first, w_end - 2)
          << "rank " << i << " stage " << stage << ": no mirror sum left during its last W";
      EXPECT_LE(posted.second, w_end + 2) << "rank " << i << " stage " << stage;
    }
  }
}

}  // namespace
}  // namespace xhc::worker
