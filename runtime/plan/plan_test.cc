#include "runtime/plan/plan.h"

#include "gtest/gtest.h"

namespace xhc::plan {
namespace {

Config WithPipeline(const std::string& schedule, int layers, int microbatches) {
  Config c;
  c.model.n_layers = layers;
  c.pipeline.schedule = schedule;
  c.train.microbatches = microbatches;
  return c;
}

TEST(Plan, SplitCoversEveryLayerOnceWithEndsLighter) {
  for (int layers = 1; layers <= 12; ++layers) {
    for (int stages = 1; stages <= layers; ++stages) {
      const auto specs = SplitLayers(layers, stages);
      ASSERT_EQ(static_cast<int>(specs.size()), stages);
      int next = 0, lo = layers, hi = 0;
      for (const auto& s : specs) {
        EXPECT_EQ(s.first_layer, next);
        next += s.num_layers;
        lo = std::min(lo, s.num_layers);
        hi = std::max(hi, s.num_layers);
      }
      EXPECT_EQ(next, layers);
      EXPECT_LE(hi - lo, 1);
      EXPECT_TRUE(specs.front().has_embed);
      EXPECT_TRUE(specs.back().has_head);
      if (layers % stages != 0 && layers % stages <= stages - 2) {
        EXPECT_EQ(specs.front().num_layers, lo);
        EXPECT_EQ(specs.back().num_layers, lo);
      }
    }
  }
}

TEST(Plan, DualPipeVHoldsAVAndLowers) {
  absl::StatusOr<JobPlan> p = MakePlan(WithPipeline("dualpipev", 8, 8), 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->schedule.num_stages, 8);
  EXPECT_EQ(p->StagesOf(0), (std::vector<int>{0, 7}));
  EXPECT_EQ(p->lowered.size(), 4u);
  EXPECT_FALSE(DescribeRankActions(*p, 0).empty());
}

TEST(Plan, BadRequestsNameTheKey) {
  auto expect = [](const absl::StatusOr<JobPlan>& p, const std::string& key) {
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(p.status().message()).find(key), std::string::npos)
        << p.status().message();
  };
  expect(MakePlan(WithPipeline("dualpipe", 8, 8), 3), "pipeline.schedule");
  expect(MakePlan(WithPipeline("bogus", 8, 8), 2), "pipeline.schedule");
  expect(MakePlan(WithPipeline("dualpipev", 4, 8), 4), "model.n_layers");
  expect(MakePlan(WithPipeline("1f1b", 4, 8), 0), "pipeline.workers");
}

TEST(Plan, TooFewMicrobatchesNamesTheKeys) {
  for (const std::string type : {"dualpipev", "dualpipe"}) {
    absl::StatusOr<JobPlan> p = MakePlan(WithPipeline(type, 8, 7), 4);
    ASSERT_FALSE(p.ok()) << type;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(p.status().message()),
              "train.microbatches: 7 is too few for pipeline.schedule " + type +
                  " on pipeline.workers = 4: it needs train.microbatches >= 8 (2 x workers); "
                  "raise train.microbatches or lower pipeline.workers");
    EXPECT_TRUE(MakePlan(WithPipeline(type, 8, 8), 4).ok()) << type;
  }
}

// xhc_flash window 4 spans two layers: stages hold whole layer pairs (spec 4.5), and a
// pipeline that would need to cut a pair is refused naming the window key.
TEST(Plan, FlashWindowsNeverStraddleAStage) {
  Config c = WithPipeline("1f1b", 12, 8);
  c.model.residual.type = ResidualType::kXhcFlash;
  c.model.residual.window = 4;
  for (int workers : {1, 2, 3, 4, 6}) {
    absl::StatusOr<JobPlan> p = MakePlan(c, workers);
    ASSERT_TRUE(p.ok()) << p.status();
    int next = 0;
    for (const auto& s : p->stages) {
      EXPECT_EQ(s.first_layer % 2, 0) << workers << " workers";
      EXPECT_EQ(s.num_layers % 2, 0) << workers << " workers";
      EXPECT_EQ(s.first_layer, next);
      next += s.num_layers;
    }
    EXPECT_EQ(next, 12);
  }
  absl::StatusOr<JobPlan> too_many = MakePlan(c, 12);  // 12 stages of 12 layers: pairs cut
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(std::string(too_many.status().message()).find("model.residual.window"),
            std::string::npos)
      << too_many.status().message();
  c.model.residual.window = 2;  // one layer per window: any layer split is fine
  EXPECT_TRUE(MakePlan(c, 12).ok());
}

TEST(Plan, NewTypesPlaceTheirChunks) {
  absl::StatusOr<JobPlan> zbv = MakePlan(WithPipeline("zbv", 8, 8), 4);
  ASSERT_TRUE(zbv.ok()) << zbv.status();
  EXPECT_EQ(zbv->StagesOf(0), (std::vector<int>{0, 7}));  // the V
  EXPECT_EQ(zbv->StagesOf(3), (std::vector<int>{3, 4}));
  Config looped = WithPipeline("interleaved_zb", 8, 8);
  looped.pipeline.chunks = 2;
  absl::StatusOr<JobPlan> izb = MakePlan(looped, 4);
  ASSERT_TRUE(izb.ok()) << izb.status();
  EXPECT_EQ(izb->StagesOf(1), (std::vector<int>{1, 5}));  // looped
  looped.pipeline.schedule = "looped_bfs";
  absl::StatusOr<JobPlan> bfs = MakePlan(looped, 4);
  ASSERT_TRUE(bfs.ok()) << bfs.status();
  EXPECT_EQ(bfs->StagesOf(2), (std::vector<int>{2, 6}));
}

std::vector<int> Counts(const std::vector<model::StageSpec>& specs) {
  std::vector<int> counts;
  for (const auto& s : specs) counts.push_back(s.num_layers);
  return counts;
}

Config Uneven(const std::string& schedule, int layers, std::optional<int> first,
              std::optional<int> last) {
  Config c = WithPipeline(schedule, layers, 8);
  c.pipeline.first_stage_layers = first;
  c.pipeline.last_stage_layers = last;
  return c;
}

TEST(PlanUneven, PinnedEndsAndAnEvenMiddle) {
  EXPECT_EQ(Counts(SplitLayers(8, 4, 1, 3)), (std::vector<int>{1, 2, 2, 3}));
  // One end pinned: the other stages share the rest, the middle taking the remainder.
  EXPECT_EQ(Counts(SplitLayers(8, 4, 1, std::nullopt)), (std::vector<int>{1, 3, 2, 2}));
  EXPECT_EQ(Counts(SplitLayers(8, 4, std::nullopt, 0)), (std::vector<int>{2, 3, 3, 0}));
  EXPECT_EQ(Counts(SplitLayers(7, 4, 0, 0)), (std::vector<int>{0, 4, 3, 0}));
  EXPECT_EQ(Counts(SplitLayers(8, 2, 0, std::nullopt)), (std::vector<int>{0, 8}));
  // Unpinned: today's even split, unchanged.
  EXPECT_EQ(Counts(SplitLayers(10, 4)), Counts(SplitLayers(10, 4, std::nullopt, std::nullopt)));
  EXPECT_EQ(Counts(SplitLayers(10, 4)), (std::vector<int>{2, 3, 3, 2}));
  // Every layer exactly once, in order, embedding first and head last.
  const auto specs = SplitLayers(8, 4, 1, 3);
  int next = 0;
  for (const auto& s : specs) {
    EXPECT_EQ(s.first_layer, next);
    next += s.num_layers;
  }
  EXPECT_EQ(next, 8);
  EXPECT_TRUE(specs.front().has_embed && !specs.front().has_head);
  EXPECT_TRUE(specs.back().has_head && !specs.back().has_embed);
}

TEST(PlanUneven, PlansPinTheGlobalFirstAndLastStage) {
  absl::StatusOr<JobPlan> p = MakePlan(Uneven("1f1b", 8, 1, 3), 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Counts(p->stages), (std::vector<int>{1, 2, 2, 3}));
  // DualPipeV: rank 0 holds stage 0 (embedding) and stage 3 (head).
  p = MakePlan(Uneven("dualpipev", 8, 3, 1), 2);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Counts(p->stages), (std::vector<int>{3, 2, 2, 1}));
  EXPECT_EQ(DescribeStageLayers(*p, p->StagesOf(0)), "3, 1");
  // An end may hold no layer at all, so 4 stages fit 3 layers.
  p = MakePlan(Uneven("1f1b", 3, 0, std::nullopt), 4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Counts(p->stages), (std::vector<int>{0, 1, 1, 1}));
  absl::StatusOr<JobPlan> even = MakePlan(WithPipeline("1f1b", 3, 8), 4);
  ASSERT_FALSE(even.ok());
  EXPECT_NE(std::string(even.status().message()).find("model.n_layers"), std::string::npos);
  // One stage holds everything: the keys do not apply.
  p = MakePlan(Uneven("1f1b", 8, 1, 3), 1);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Counts(p->stages), (std::vector<int>{8}));
  // A CSV's stages are pinned the same way.
  Config csv = Uneven("1f1b", 4, 1, std::nullopt);
  csv.train.microbatches = 2;
  p = MakePlanFromCsv(csv, 2, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n", "test.csv");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Counts(p->stages), (std::vector<int>{1, 3}));
}

TEST(PlanUneven, BadPinsNameTheKeys) {
  auto expect = [](const Config& c, int workers, const std::string& text) {
    absl::StatusOr<JobPlan> p = MakePlan(c, workers);
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(p.status().message()).find(text), std::string::npos)
        << p.status().message();
  };
  expect(Uneven("1f1b", 8, 4, 3), 4,
         "pipeline.first_stage_layers, pipeline.last_stage_layers: "
         "pipeline.first_stage_layers = 4 and pipeline.last_stage_layers = 3 leave 1 of "
         "model.n_layers = 8 layers for the 2 other stages of 1f1b on 4 workers: a middle "
         "stage would be empty");
  expect(Uneven("1f1b", 8, 7, std::nullopt), 4,
         "pipeline.first_stage_layers: pipeline.first_stage_layers = 7 leaves 1");
  expect(Uneven("1f1b", 8, 2, 2), 2,
         "pipeline.first_stage_layers = 2 and pipeline.last_stage_layers = 2 hold 4 of "
         "model.n_layers = 8 layers, but 1f1b on 2 workers has only these 2 stages");
  // Built by code rather than parsed: the plan checks the sum itself.
  expect(Uneven("1f1b", 8, 6, 6), 2, "exceed model.n_layers = 8");
  Config flash = Uneven("1f1b", 12, 3, std::nullopt);
  flash.model.residual.type = ResidualType::kXhcFlash;
  flash.model.residual.window = 4;
  expect(flash, 2,
         "pipeline.first_stage_layers: 3 is not a multiple of 2: "
         "model.residual.window 4 keeps layer pairs in one stage");
  flash.pipeline.first_stage_layers = 2;
  absl::StatusOr<JobPlan> p = MakePlan(flash, 3);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(Counts(p->stages), (std::vector<int>{2, 6, 4}));
}

// Exactly what `xhc schedule --type 1f1b --ranks 2 --microbatches 2 --format torch-csv` writes.
constexpr char kOneFOneBCsv[] = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";

TEST(PlanCsv, PlacementAndMessagesComeFromTheCsv) {
  Config c = WithPipeline("1f1b", 4, 2);
  absl::StatusOr<JobPlan> p = MakePlanFromCsv(c, 2, kOneFOneBCsv, "test.csv");
  ASSERT_TRUE(p.ok()) << p.status();
  absl::StatusOr<JobPlan> built = MakePlan(c, 2);
  ASSERT_TRUE(built.ok());
  // A compute-only CSV gets the sends and receives the built-in type would have.
  for (int r = 0; r < 2; ++r) EXPECT_EQ(DescribeRankActions(*p, r), DescribeRankActions(*built, r));
  EXPECT_EQ(p->schedule_csv, kOneFOneBCsv);
  EXPECT_EQ(p->schedule.type, "custom");
  // Hand-placed: rank 0 holds stages 0 and 2, rank 1 stage 1; 2 micro-batches.
  const std::string looped = "0F0,0F1,2F0,2B0,2F1,2B1,0B0,0B1\n1F0,1F1,1B0,1B1\n";
  p = MakePlanFromCsv(c, 2, looped, "looped.csv");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->StagesOf(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(p->StagesOf(1), (std::vector<int>{1}));
  EXPECT_EQ(p->schedule.LossRanks(), (std::vector<int>{0}));
  EXPECT_EQ(p->stages.size(), 3u);
  // Rows with SEND/RECV run as written (peers filled in from the placement).
  const std::string lowered =
      "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0RECV_B1,0B0,0B1\n"
      "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n";
  p = MakePlanFromCsv(c, 2, lowered, "lowered.csv");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(DescribeRankActions(*p, 0),
            "0F0@-1 0SEND_F0@1 0F1@-1 0SEND_F1@1 0RECV_B0@1 0RECV_B1@1 0B0@-1 0B1@-1");
}

TEST(PlanCsv, RefusesWithTheKeyAndTheGrid) {
  Config c = WithPipeline("1f1b", 4, 2);
  struct Bad {
    std::string csv;
    int workers;
    std::string message;
    absl::StatusCode code = absl::StatusCode::kInvalidArgument;
  };
  const Bad cases[] = {
      {kOneFOneBCsv, 3, "has 2 rows (one per rank) but the job has 3 workers"},
      {"0F0,0B0\n1F0,1B0\n", 2, "schedules 1 micro-batches but train.microbatches = 2"},
      {"0F0,0X1\n1F0\n", 2, "csv row 0 (rank 0) cell 1"},
      {"0F0,0F1,0B0\n1F0,1B0,1F1,1B1\n", 2, "has 1 F, 0 B, 0 I, 0 W"},
      // Rank 1 runs micro-batch 1 first while rank 0 waits for micro-batch 0's backward.
      {"0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n", 2, ">>1F1<<", absl::StatusCode::kFailedPrecondition},
      // A lowered CSV whose send is never received.
      {"0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0RECV_B1,0B0,0B1\n"
       "1RECV_F0,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n",
       2, "input is never received before use"},
  };
  for (const Bad& bad : cases) {
    absl::StatusOr<JobPlan> p = MakePlanFromCsv(c, bad.workers, bad.csv, "bad.csv");
    ASSERT_FALSE(p.ok()) << bad.message;
    EXPECT_EQ(p.status().code(), bad.code) << p.status();
    const std::string text(p.status().message());
    EXPECT_EQ(text.rfind("pipeline.schedule_csv bad.csv: ", 0), 0u) << text;
    EXPECT_NE(text.find(bad.message), std::string::npos) << text;
  }
  // Stages beyond the model's layers name the key.
  absl::StatusOr<JobPlan> too_deep =
      MakePlanFromCsv(WithPipeline("1f1b", 1, 2), 2, kOneFOneBCsv, "bad.csv");
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(std::string(too_deep.status().message()).find("model.n_layers"), std::string::npos);
  c.pipeline.schedule_csv = "/nonexistent/schedule.csv";
  absl::StatusOr<JobPlan> missing = MakePlan(c, 2);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.status().message()).find("pipeline.schedule_csv"),
            std::string::npos);
}

// D replicas of a P-rank pipeline: world rank = replica x P + pipeline rank, each replica
// scheduling its contiguous block of M / D micro-batches.
TEST(Plan, DataParallelGridOfReplicas) {
  Config c = WithPipeline("1f1b", 4, 8);
  c.pipeline.data_parallel = 2;
  absl::StatusOr<JobPlan> p = MakePlan(c, 2);  // data_parallel from the config
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->data_parallel, 2);
  EXPECT_EQ(p->num_ranks(), 2);
  EXPECT_EQ(p->world_size(), 4);
  EXPECT_EQ(p->schedule.num_microbatches, 4);
  EXPECT_EQ(p->ReplicaOf(3), 1);
  EXPECT_EQ(p->PipelineRankOf(3), 1);
  EXPECT_EQ(p->WorldRank(1, 0), 2);
  EXPECT_EQ(p->GlobalMicrobatch(0, 3), 3);
  EXPECT_EQ(p->GlobalMicrobatch(1, 0), 4);
  // Replicas run the same list, told apart by their prefix.
  const std::string r0 = DescribeRankActions(*p, 0), r2 = DescribeRankActions(*p, 2);
  EXPECT_EQ(r0.rfind("replica 0/2: ", 0), 0u) << r0;
  EXPECT_EQ(r2.rfind("replica 1/2: ", 0), 0u) << r2;
  EXPECT_EQ(r0.substr(13), r2.substr(13));
  // The argument wins over the config (xhc launch --data-parallel).
  absl::StatusOr<JobPlan> four = MakePlan(c, 1, 4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->world_size(), 4);
  EXPECT_EQ(four->schedule.num_microbatches, 2);
  // A replica count that does not divide the micro-batches names the key.
  absl::StatusOr<JobPlan> three = MakePlan(c, 2, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(three.status().message()).find("pipeline.data_parallel: 3"),
            std::string::npos)
      << three.status();
  // Too few micro-batches per replica for DualPipeV says that the count is per replica.
  absl::StatusOr<JobPlan> dpv = MakePlan(WithPipeline("dualpipev", 4, 4), 2, 2);
  ASSERT_FALSE(dpv.ok());
  EXPECT_NE(std::string(dpv.status().message())
                .find("per replica: train.microbatches 4 / "
                      "pipeline.data_parallel 2"),
            std::string::npos)
      << dpv.status();
}

}  // namespace
}  // namespace xhc::plan
