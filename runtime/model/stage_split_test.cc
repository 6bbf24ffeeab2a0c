// A model cut into three stages (embedding + layer 0 | layer 1 | layer 2 + head), the state
// handed from stage to stage by the caller, against the same model as one stage: the loss
// and every gradient bit for bit, with the middle stage's input gradient written to its own
// buffer and into the buffer of the gradient it came from (BackwardInput allows
// dx_in == dx_out, as the worker passes it).
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/stage.h"

namespace xhc::model {
namespace {

struct Variant {
  const char* name;
  ResidualType type;
  int n_streams;
  int window = 2;
};

ModelConfig Cfg(const Variant& v) {
  ModelConfig c;
  c.vocab_size = 13;
  c.d_model = 8;
  c.n_layers = 3;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_ff = 12;
  c.seq_len = 6;
  c.residual.type = v.type;
  c.residual.n_streams = v.n_streams;
  c.residual.n_active = 3;
  c.residual.n_fixed = 1;
  c.residual.conv_kernels = v.type == ResidualType::kVanilla ? std::vector<int>{}
                                                             : std::vector<int>{2, 3};
  c.residual.sinkhorn_iters = 4;
  c.residual.window = v.window;
  absl::Status s = ValidateModel(c);
  EXPECT_TRUE(s.ok()) << s;
  return c;
}

// Init from the seed, then a perturbation drawn from each tensor's name (so the full model
// and the stages, which hold different subsets, get the same values).
std::unique_ptr<ParamSetT<float>> MakeParams(const ModelConfig& cfg, const StageSpec& spec) {
  auto ps = std::make_unique<ParamSetT<float>>(BuildStageParams<float>(cfg, spec));
  InitParams(cfg, 7, ps.get());
  for (auto& p : ps->all()) {
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(p->name)));
    std::normal_distribution<double> nd(0.0, 0.3);
    for (auto& v : p->value) v += static_cast<float>(nd(rng));
  }
  ps->ZeroGrads();
  return ps;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class StageSplit : public ::testing::TestWithParam<std::tuple<Variant, bool>> {};

TEST_P(StageSplit, ThreeStagesMatchOneStageBitForBit) {
  const auto [variant, in_place] = GetParam();
  const ModelConfig cfg = Cfg(variant);
  const int B = 2, n = B * cfg.seq_len;
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(n), targets(n);
  for (int i = 0; i < n; ++i) {
    tokens[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
    targets[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
  }

  auto full_ps = MakeParams(cfg, StageSpec::Full(cfg));
  StageModel full(cfg, StageSpec::Full(cfg), full_ps.get());
  const double full_loss = *full.Forward(0, B, tokens.data(), targets.data(), nullptr, nullptr);
  ASSERT_TRUE(full.BackwardInput(0, 1.0, nullptr, nullptr).ok());
  ASSERT_TRUE(full.BackwardWeight(0).ok());
  full_ps->FinalizeGrads();

  const StageSpec specs[3] = {{0, 1, true, false}, {1, 1, false, false}, {2, 1, false, true}};
  std::vector<std::unique_ptr<ParamSetT<float>>> ps;
  std::vector<std::unique_ptr<StageModel>> stages;
  for (const StageSpec& spec : specs) {
    ps.push_back(MakeParams(cfg, spec));
    stages.push_back(std::make_unique<StageModel>(cfg, spec, ps.back().get()));
  }
  const size_t size = static_cast<size_t>(stages[0]->StateElements(B));
  std::vector<float> x1(size), x2(size), g2(size), g1(size);
  ASSERT_TRUE(stages[0]->Forward(0, B, tokens.data(), nullptr, nullptr, x1.data()).ok());
  ASSERT_TRUE(stages[1]->Forward(0, B, nullptr, nullptr, x1.data(), x2.data()).ok());
  const double loss = *stages[2]->Forward(0, B, nullptr, targets.data(), x2.data(), nullptr);
  EXPECT_EQ(loss, full_loss);
  ASSERT_TRUE(stages[2]->BackwardInput(0, 1.0, nullptr, g2.data()).ok());
  float* g_in = in_place ? g2.data() : g1.data();
  ASSERT_TRUE(stages[1]->BackwardInput(0, 1.0, g2.data(), g_in).ok());
  ASSERT_TRUE(stages[0]->BackwardInput(0, 1.0, g_in, nullptr).ok());
  int compared = 0;
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(stages[s]->BackwardWeight(0).ok());
    ps[s]->FinalizeGrads();
    for (const auto& p : ps[s]->all()) {
      const ParamT<float>* whole = full_ps->Find(p->name);
      ASSERT_NE(whole, nullptr) << p->name;
      EXPECT_TRUE(SameBits(p->value, whole->value)) << p->name << ": values differ";
      EXPECT_TRUE(SameBits(p->grad, whole->grad)) << p->name << ": gradient differs";
      ++compared;
    }
  }
  EXPECT_EQ(compared, static_cast<int>(full_ps->all().size()));
}

INSTANTIATE_TEST_SUITE_P(
    Residuals, StageSplit,
    ::testing::Combine(::testing::Values(Variant{"vanilla", ResidualType::kVanilla, 1},
                                         Variant{"xhc", ResidualType::kXhc, 6},
                                         Variant{"xhc_flash2", ResidualType::kXhcFlash, 6, 2}),
                       ::testing::Bool()),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) +
             (std::get<1>(info.param) ? "_in_place" : "_own_buffer");
    });

}  // namespace
}  // namespace xhc::model
