// Data parallelism (DP x PP) against single-process training, with real processes, gRPC and
// gloo on loopback: D = 2 replicas of a 1-rank pipeline, of a 2-rank 1F1B pipeline and of a
// 2-rank DualPipeV pipeline give every step's micro-batch losses and the checkpointed
// parameters and AdamW moments after steps 4 and 8 bit-identical to `xhc train` with the
// same global batch (DualPipeV also with XHC_REPLICA_REDUCE_BLOCKING=1, the measurement
// mode). Checkpoints hold one shard per pipeline rank
// (replica 0 alone writes), and a checkpoint written at D = 2 resumes at D = 1 and ends
// bit-identical to the uninterrupted run.
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {
namespace fs = std::filesystem;

constexpr int kSteps = 8;
constexpr int kMicrobatches = 8;  // train.microbatches: the global batch, split over replicas

struct Grid {
  std::string schedule;
  int pipeline_ranks;
  int replicas;
  bool by_flag;          // --data-parallel on the command line instead of pipeline.data_parallel
  std::string env = "";  // environment for the launch ("XHC_REPLICA_REDUCE_BLOCKING=1")
};

std::string Yaml(const std::string& corpus, const std::string& pipeline) {
  return absl::StrCat(
      "model: {d_model: 16, n_layers: 4, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,\n"
      "        residual: {type: xhc, n_streams: 6, n_active: 3, n_fixed: 1, conv_kernels: [2]}}\n"
      "optim: {lr: 0.01, warmup_steps: 3}\n"
      "train: {steps: ",
      kSteps,
      ", batch_size: 2, microbatches: 8, seed: 21, eval_every: 0}\n"
      "data: {train: ",
      corpus,
      "}\n"
      "checkpoint: {every: 4, keep: 100}\n",
      pipeline);
}

int ShardFiles(const std::string& run, int step) {
  int n = 0;
  const fs::path dir = fs::path(run) / "checkpoints" / absl::StrCat("step-00000", step);
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".safetensors";
  return n;
}

class DataParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string text;
    for (int i = 0; i < 300; ++i) absl::StrAppend(&text, "replicas agree; ", i, " steps.\n");
    WriteText(corpus_, text);
    WriteText(dir_ + "/single.yaml", Yaml(corpus_, ""));
    ASSERT_EQ(RunCommand(absl::StrCat(XhcBinary(), " train --config ", dir_, "/single.yaml --out ",
                                      single_),
                         log_),
              0)
        << ReadText(log_);
    want_losses_ = MicrobatchLosses(single_);
    ASSERT_EQ(want_losses_.size(), static_cast<size_t>(kSteps));
    want_first_ = CheckpointFingerprint(single_, 4);
    want_last_ = CheckpointFingerprint(single_, kSteps);
    ASSERT_FALSE(want_last_.empty());
    ASSERT_NE(want_first_, want_last_) << "training did not move the weights";
  }

  // Runs the grid; returns its run directory.
  std::string Launch(const Grid& g) {
    const std::string run = absl::StrCat(dir_, "/", g.schedule, "_pp", g.pipeline_ranks, "_dp",
                                         g.replicas, g.env.empty() ? "" : "_env");
    const std::string cfg = run + ".yaml";
    WriteText(
        cfg,
        Yaml(corpus_,
             absl::StrCat("pipeline: {schedule: ", g.schedule, ", workers: ", g.pipeline_ranks,
                          g.by_flag ? "" : absl::StrCat(", data_parallel: ", g.replicas), "}\n")));
    const std::string run_log = run + ".log";
    EXPECT_EQ(
        RunCommand(absl::StrCat(g.env.empty() ? "" : "env " + g.env + " ", XhcBinary(),
                                " launch --config ", cfg, " --out ", run,
                                g.by_flag ? absl::StrCat(" --data-parallel ", g.replicas) : ""),
                   run_log),
        0)
        << ReadText(run_log);
    EXPECT_NE(ReadText(run_log).find(
                  absl::StrCat("starting ", g.pipeline_ranks * g.replicas, " workers")),
              std::string::npos)
        << ReadText(run_log);
    EXPECT_NE(ReadText(run_log).find(absl::StrCat("replica 1 of ", g.replicas)), std::string::npos)
        << "no worker ran as replica 1:\n"
        << ReadText(run_log);
    ExpectEachReplicaComputedItsBlock(run, g);
    return run;
  }

  // Each replica's ranks computed exactly their replica's block of micro-batches (the trace's
  // compute spans carry the job-wide micro-batch), and together every micro-batch: a replica
  // that contributed zeros while another computed its block would still match `xhc train`.
  void ExpectEachReplicaComputedItsBlock(const std::string& run, const Grid& g) {
    nlohmann::json doc =
        nlohmann::json::parse(ReadText(run + "/trace.json"), nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(doc.is_discarded()) << run << "/trace.json";
    const int per_replica = kMicrobatches / g.replicas;
    std::map<int, std::set<int>> computed;  // world rank -> micro-batches of its F spans
    for (const nlohmann::json& e : doc["traceEvents"]) {
      if (e.value("ph", "") != "X" || e.value("name", "").rfind("F", 0) != 0) continue;
      if (!e.contains("args") || !e["args"].contains("microbatch")) continue;
      computed[e.value("pid", -1)].insert(e["args"]["microbatch"].get<int>());
    }
    ASSERT_EQ(static_cast<int>(computed.size()), g.pipeline_ranks * g.replicas)
        << "ranks with forward spans";
    for (const auto& [rank, mbs] : computed) {
      const int replica = rank / g.pipeline_ranks;
      std::set<int> want;
      for (int m = 0; m < per_replica; ++m) want.insert(replica * per_replica + m);
      EXPECT_EQ(mbs, want) << "rank " << rank << " (replica " << replica << ")";
    }
  }

  std::string dir_ = FreshDir("data_parallel"), corpus_ = dir_ + "/corpus.txt";
  std::string log_ = dir_ + "/log.txt", single_ = dir_ + "/single";
  std::vector<std::string> want_losses_;
  std::string want_first_, want_last_;
};

TEST_F(DataParallel, GridsMatchSingleProcessBitForBit) {
  for (const Grid& g :
       {Grid{"1f1b", 1, 2, true}, Grid{"1f1b", 2, 2, false}, Grid{"dualpipev", 2, 2, true},
        // DualPipe's mirror sums, finished before each replica exchange.
        Grid{"dualpipe", 2, 2, true},
        // The measurement mode (each exchange waited for at once) changes
        // only timing.
        Grid{"dualpipev", 2, 2, true, "XHC_REPLICA_REDUCE_BLOCKING=1"}}) {
    SCOPED_TRACE(
        absl::StrCat(g.schedule, " PP=", g.pipeline_ranks, " x DP=", g.replicas, " ", g.env));
    const std::string run = Launch(g);
    const std::vector<std::string> got = MicrobatchLosses(run);
    ASSERT_EQ(got.size(), want_losses_.size());
    for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got[s], want_losses_[s]) << "step " << s + 1;
    EXPECT_TRUE(CheckpointFingerprint(run, 4) == want_first_) << "parameters after step 4";
    EXPECT_TRUE(CheckpointFingerprint(run, kSteps) == want_last_) << "final parameters";
    // One shard per pipeline rank holding a canonical copy (the lowest of a stage's
    // holders: under 2-rank DualPipe rank 0 holds both stages), and replica 1 wrote nothing.
    EXPECT_EQ(ShardFiles(run, kSteps), g.schedule == "dualpipe" ? 1 : g.pipeline_ranks);
    std::printf("%s PP=%d x DP=%d %s: losses %s, parameters %s\n", g.schedule.c_str(),
                g.pipeline_ranks, g.replicas, g.env.c_str(),
                got == want_losses_ ? "bit-identical" : "DIFFER",
                CheckpointFingerprint(run, kSteps) == want_last_ ? "bit-identical" : "DIFFER");
  }
}

TEST_F(DataParallel, CheckpointOfTwoReplicasResumesOnOne) {
  const std::string full = Launch(Grid{"1f1b", 2, 2, false});
  // A copy of the D = 2 run that stopped after its step-4 checkpoint, resumed with D = 1
  // (the run directory's config says data_parallel: 2; the flag overrides it).
  const std::string cut = dir_ + "/resumed";
  fs::copy(full, cut, fs::copy_options::recursive);
  fs::remove_all(cut + "/checkpoints/step-000008");
  WriteText(cut + "/checkpoints/LATEST", "step-000004\n");
  fs::remove(cut + "/metrics.jsonl");
  ASSERT_EQ(
      RunCommand(absl::StrCat(XhcBinary(), " launch --resume ", cut, " --data-parallel 1"), log_),
      0)
      << ReadText(log_);
  EXPECT_NE(ReadText(log_).find("continuing from " + cut + "/checkpoints/step-000004"),
            std::string::npos)
      << ReadText(log_);
  EXPECT_NE(ReadText(log_).find("starting 2 workers (1f1b, 1 replica(s))"), std::string::npos)
      << ReadText(log_);
  const std::vector<std::string> got = MicrobatchLosses(cut);
  ASSERT_EQ(got.size(), 4u);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(got[s], want_losses_[4 + s]) << "step " << 5 + s;
  EXPECT_TRUE(CheckpointFingerprint(cut, kSteps) == want_last_)
      << "resumed at D = 1, the final parameters differ from the uninterrupted run's";
}

TEST_F(DataParallel, ReplicasThatCannotSplitTheBatchAreRefusedBeforeAnyWorkerStarts) {
  WriteText(dir_ + "/three.yaml", Yaml(corpus_, "pipeline: {workers: 1}\n"));
  ASSERT_NE(RunCommand(absl::StrCat(XhcBinary(), " launch --config ", dir_, "/three.yaml --out ",
                                    dir_, "/three --data-parallel 3"),
                       log_),
            0);
  const std::string out = ReadText(log_);
  EXPECT_NE(out.find("pipeline.data_parallel: 3 replicas cannot split train.microbatches = 8"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("registered"), std::string::npos) << out;
}

}  // namespace
}  // namespace xhc::testing
