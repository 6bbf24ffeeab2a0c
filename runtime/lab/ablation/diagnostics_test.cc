#include "runtime/lab/ablation/diagnostics.h"

#include <cstdlib>
#include <random>

#include "gtest/gtest.h"
#include "runtime/model/params.h"

namespace xhc::ablation {
namespace {

uint64_t Seed() {
  const char* s = std::getenv("XHC_TEST_SEED");
  const uint64_t seed = s ? std::strtoull(s, nullptr, 10) : 1234;
  std::printf("XHC_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

ModelConfig Model(const std::string& residual, int layers = 1) {
  auto c = ParseConfig("model: {vocab_size: 256, d_model: 16, n_layers: " + std::to_string(layers) +
                       ", n_heads: 2, n_kv_heads: 1, seq_len: 8, residual: " + residual + "}\n");
  EXPECT_TRUE(c.ok()) << c.status();
  return c->model;
}

TokenBatch Batch(uint64_t seed) {
  std::mt19937_64 rng(seed);
  TokenBatch b;
  b.batch = 2;
  b.seq_len = 8;
  for (int i = 0; i < 16; ++i) {
    b.inputs.push_back(static_cast<int32_t>(rng() % 256));
    b.targets.push_back(static_cast<int32_t>(rng() % 256));
  }
  return b;
}

absl::StatusOr<Diagnostics> RunDiag(const ModelConfig& m, uint64_t seed,
                                    model::ParamSetT<float>* params) {
  return ComputeDiagnostics(m, params, Batch(seed));
}

TEST(MixingGainTest, EmbedActiveReplacesTheActiveRows) {
  const int idx[] = {2, 0};
  const float hres[] = {0.5f, 0.25f, 0.75f, 0.125f};  // row slot 0: 0.5 e2 + 0.25 e0
  const std::vector<double> m = EmbedActive(4, 2, idx, hres);
  const std::vector<double> want = {0.125, 0, 0.75, 0,  // row 0 = slot 1
                                    0,     1, 0,    0,  // passes through
                                    0.25,  0, 0.5,  0,  // row 2 = slot 0
                                    0,     0, 0,    1};
  EXPECT_EQ(m, want);
}

TEST(MixingGainTest, HandCheckedProduct) {
  CompositeMixing c(1, 2);
  c.Apply({1, 0.5, 0, 1});
  c.Apply({1, 0.5, 0, 1});  // [[1, 1], [0, 1]]
  const MixingStats s = c.Stats();
  EXPECT_DOUBLE_EQ(s.forward_max, 2);   // row 0: |1| + |1|
  EXPECT_DOUBLE_EQ(s.backward_max, 2);  // column 1
  EXPECT_DOUBLE_EQ(s.self_share, 1);
  c.Apply({0, 1, 1, 0});  // swap the streams: diagonal [0, 1]... of [[0, 1], [1, 1]]
  EXPECT_DOUBLE_EQ(c.Stats().self_share, 0.5);
}

TEST(DiagnosticsTest, VanillaGainIsExactlyOne) {
  const uint64_t seed = Seed();
  const ModelConfig m = Model("{type: vanilla}", 2);
  auto params = model::BuildStageParams<float>(m, model::StageSpec::Full(m));
  model::InitParams(m, seed, &params);
  auto d = RunDiag(m, seed, &params);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->depth.size(), 4u);
  EXPECT_EQ(d->final().forward_max, 1.0);
  EXPECT_EQ(d->final().backward_max, 1.0);
  EXPECT_EQ(d->final().self_share, 1.0);
  EXPECT_TRUE(d->router_load.empty());
  EXPECT_TRUE(d->grad_norms.empty());  // no residual parameters
}

// Sinkhorn makes every Hres (nearly) doubly stochastic, and a product of doubly stochastic
// matrices is doubly stochastic: the gains stay at 1 over depth, even with random maps.
TEST(DiagnosticsTest, DoublyStochasticTypesStayAtOne) {
  const uint64_t seed = Seed();
  for (const std::string res :
       {"{type: mhc, n_streams: 4}", "{type: xhc, n_streams: 8, n_active: 4, n_fixed: 2}",
        "{type: xhc_flash, n_streams: 8, n_active: 4, n_fixed: 2, window: 2}"}) {
    SCOPED_TRACE(res);
    const ModelConfig m = Model(res, 2);
    auto params = model::BuildStageParams<float>(m, model::StageSpec::Full(m));
    model::InitParams(m, seed, &params);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> g(0, 1);
    for (auto& p : params.all()) {  // far from the near-identity init
      if (p->name.find("res.bias") != std::string::npos) {
        for (float& v : p->value) v = g(rng);
      }
    }
    auto d = RunDiag(m, seed, &params);
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->depth.size(), 4u);
    for (const MixingStats& s : d->depth) {
      EXPECT_NEAR(s.forward_max, 1.0, 1e-3);
      EXPECT_NEAR(s.backward_max, 1.0, 1e-3);
    }
    EXPECT_LT(d->final().self_share, 0.999);  // the random maps really mix
    EXPECT_FALSE(d->grad_norms.empty());
    for (const auto& [group, norm] : d->grad_norms) EXPECT_GT(norm, 0) << group;
  }
}

// hc with zero res.weight: Hres is res.bias exactly (alpha · tanh(0) = 0). With bias
// [[1, 0.5], [0, 1]] on both sublayers of one layer the composite is [[1, 1], [0, 1]]: gain 2.
TEST(DiagnosticsTest, HcGainGrowsPastOne) {
  const uint64_t seed = Seed();
  const ModelConfig m = Model("{type: hc, n_streams: 2}");
  auto params = model::BuildStageParams<float>(m, model::StageSpec::Full(m));
  model::InitParams(m, seed, &params);
  for (const char* side : {"attn_hc", "mlp_hc"}) {
    auto* w = params.Find(std::string("layers.0.") + side + ".res.weight");
    auto* b = params.Find(std::string("layers.0.") + side + ".res.bias");
    ASSERT_NE(w, nullptr);
    ASSERT_NE(b, nullptr);
    std::fill(w->value.begin(), w->value.end(), 0.0f);
    b->value = {1.0f, 0.5f, 0.0f, 1.0f};
  }
  auto d = RunDiag(m, seed, &params);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->depth.size(), 2u);
  EXPECT_NEAR(d->depth[0].forward_max, 1.5, 1e-6);
  EXPECT_NEAR(d->final().forward_max, 2.0, 1e-6);
  EXPECT_NEAR(d->final().forward_mean, 2.0, 1e-6);
  EXPECT_NEAR(d->final().backward_max, 2.0, 1e-6);
  EXPECT_NEAR(d->final().self_share, 1.0, 1e-6);
}

TEST(DiagnosticsTest, RouterLoadCountsActiveStreams) {
  const uint64_t seed = Seed();
  const ModelConfig m = Model("{type: xhc, n_streams: 8, n_active: 4, n_fixed: 2}");
  auto params = model::BuildStageParams<float>(m, model::StageSpec::Full(m));
  model::InitParams(m, seed, &params);
  auto d = RunDiag(m, seed, &params);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->router_load.size(), 8u);
  EXPECT_DOUBLE_EQ(d->router_load[0], 1.0);  // the fixed streams are always active
  EXPECT_DOUBLE_EQ(d->router_load[1], 1.0);
  double sum = 0;
  for (double l : d->router_load) sum += l;
  EXPECT_NEAR(sum, 4.0, 1e-12);  // k streams per token
  auto again = ParseDiagnosticsJson(DiagnosticsJson(*d));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->router_load, d->router_load);
  EXPECT_EQ(again->depth.size(), d->depth.size());
}

TEST(DiagnosticsTest, ResidualGroupNames) {
  EXPECT_EQ(ResidualGroup("layers.2.mlp_hc.res.weight"), "mlp_hc.res");
  EXPECT_EQ(ResidualGroup("layers.10.attn_hc.conv.1.weight"), "attn_hc.conv");
  EXPECT_EQ(ResidualGroup("head_hc.alpha"), "head_hc");
  EXPECT_EQ(ResidualGroup("layers.0.attn.wq.weight"), "");
  EXPECT_EQ(ResidualGroup("embed.weight"), "");
}

}  // namespace
}  // namespace xhc::ablation
