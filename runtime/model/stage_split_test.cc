// A model cut into three stages (embedding + layer 0 | layer 1 | layer 2 + head), the state
// handed from stage to stage by the caller, against the same model as one stage: the loss
// and every gradient bit for bit, with the middle stage given separate buffers and running
// in the buffer it received (Forward allows x_out == x_in and BackwardInput dx_in == dx_out,
// as the worker passes them). Warm runs first put another micro-batch (other tokens) through
// the stages, so the measured one runs in buffers a finished micro-batch left behind (the
// recycled state's X_out, BackwardInput's scratch) on every kind of stage. With `fused`, the
// stages run Backward (each sublayer's weight gradients right after its input gradient, on
// the state rebuilt in place) where the one-stage model runs BackwardInput + BackwardWeight.
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/stage.h"
#include "runtime/model/tiny_model_test_util.h"

namespace xhc::model {
namespace {

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

class StageSplit : public ::testing::TestWithParam<std::tuple<Variant, bool, bool, bool>> {};

TEST_P(StageSplit, ThreeStagesMatchOneStageBitForBit) {
  const auto [variant, in_place, warm, fused] = GetParam();
  const ModelConfig cfg = Tiny(variant, /*n_layers=*/3);
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
  // Micro-batch mb of (tok, tgt) through the three stages: forward, then input gradients.
  auto run = [&](int mb, const std::vector<int32_t>& tok, const std::vector<int32_t>& tgt,
                 double* loss) {
    ASSERT_TRUE(stages[0]->Forward(mb, B, tok.data(), nullptr, nullptr, x1.data()).ok());
    if (in_place) x2 = x1;  // the middle stage runs in the buffer it got, as the worker does
    const float* x_mid = in_place ? x2.data() : x1.data();
    ASSERT_TRUE(stages[1]->Forward(mb, B, nullptr, nullptr, x_mid, x2.data()).ok());
    *loss = *stages[2]->Forward(mb, B, nullptr, tgt.data(), x2.data(), nullptr);
    auto backward = [&](StageModel* stage, const float* dx_out, float* dx_in) {
      return fused ? stage->Backward(mb, 1.0, dx_out, dx_in)
                   : stage->BackwardInput(mb, 1.0, dx_out, dx_in);
    };
    const absl::Status last = backward(stages[2].get(), nullptr, g2.data());
    ASSERT_TRUE(last.ok()) << last;
    float* g_in = in_place ? g2.data() : g1.data();
    ASSERT_TRUE(backward(stages[1].get(), g2.data(), g_in).ok());
    ASSERT_TRUE(backward(stages[0].get(), g_in, nullptr).ok());
  };
  double loss = 0;
  if (warm) {
    ASSERT_NO_FATAL_FAILURE(run(1, targets, tokens, &loss));  // other tokens
    for (int s = 0; s < 3; ++s) {
      if (!fused) ASSERT_TRUE(stages[s]->BackwardWeight(1).ok());
      ASSERT_EQ(stages[s]->NumSpare(), 1) << "stage " << s << " kept no state for reuse";
      ps[s]->ZeroGrads();
    }
  }
  ASSERT_NO_FATAL_FAILURE(run(0, tokens, targets, &loss));
  EXPECT_EQ(loss, full_loss);
  int compared = 0;
  for (int s = 0; s < 3; ++s) {
    if (!fused) ASSERT_TRUE(stages[s]->BackwardWeight(0).ok());
    ASSERT_EQ(stages[s]->NumInFlight(), 0) << "stage " << s << " still holds the micro-batch";
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
    ::testing::Combine(::testing::Values(Variant{"vanilla", ResidualType::kVanilla, 1, {}},
                                         Variant{"hc", ResidualType::kHc, 3, {}},
                                         Variant{"mhc_conv", ResidualType::kMhc, 3, {2, 3}},
                                         Variant{"xhc", ResidualType::kXhc, 6, {2, 3}},
                                         Variant{
                                             "xhc_flash2", ResidualType::kXhcFlash, 6, {2, 3}, 2}),
                       ::testing::Bool(), ::testing::Bool(), ::testing::Bool()),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) +
             (std::get<1>(info.param) ? "_in_place" : "_own_buffer") +
             (std::get<2>(info.param) ? "_warm" : "_fresh") +
             (std::get<3>(info.param) ? "_fused" : "_split");
    });

}  // namespace
}  // namespace xhc::model
