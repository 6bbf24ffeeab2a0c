// A stage reuses the state of a finished micro-batch (caches, activations) for the next
// Forward without clearing it (stage.h, spare_). This holds only if every kernel writes each
// value before it reads it. So: one micro-batch run on a fresh model, against the same
// micro-batch run on a second model whose states held two other micro-batches (other
// tokens, so stale values differ from the fresh zeros): the loss and every gradient bit for
// bit, in every residual variant, in float and in double. The model is larger than the
// tiny one (48 tokens: three 16-token blocks and a ragged Sinkhorn batch; d_model 32) so
// the blocked kernel paths run.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/stage.h"
#include "runtime/model/tiny_model_test_util.h"

namespace xhc::model {
namespace {

ModelConfig Small(const Variant& v) {
  ModelConfig cfg = Tiny(v, /*n_layers=*/2);
  cfg.d_model = 32;
  cfg.d_ff = 48;
  cfg.seq_len = 24;
  cfg.vocab_size = 29;
  const absl::Status s = ValidateModel(cfg);
  EXPECT_TRUE(s.ok()) << s;
  return cfg;
}

std::vector<int32_t> Draw(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& t : v) t = static_cast<int32_t>(rng() % vocab);
  return v;
}

// One training micro-batch (forward, input and weight gradients) on `model`.
template <typename T>
double RunMicrobatch(StageModelT<T>* model, int mb, int B, const std::vector<int32_t>& tokens,
                     const std::vector<int32_t>& targets) {
  absl::StatusOr<double> loss =
      model->Forward(mb, B, tokens.data(), targets.data(), nullptr, nullptr);
  EXPECT_TRUE(loss.ok()) << loss.status();
  EXPECT_TRUE(model->BackwardInput(mb, 1.0, nullptr, nullptr).ok());
  EXPECT_TRUE(model->BackwardWeight(mb).ok());
  return loss.ok() ? *loss : 0.0;
}

template <typename T>
void CheckRecycledMatchesFresh(const Variant& v) {
  const ModelConfig cfg = Small(v);
  const int B = 2, n = B * cfg.seq_len;
  const std::vector<int32_t> tokens = Draw(n, cfg.vocab_size, 1),
                             targets = Draw(n, cfg.vocab_size, 2);
  auto make_params = [&] {
    auto ps = std::make_unique<ParamSetT<T>>(BuildStageParams<T>(cfg, StageSpec::Full(cfg)));
    InitParams(cfg, 7, ps.get());
    ps->ZeroGrads();
    return ps;
  };
  auto fresh_ps = make_params();
  StageModelT<T> fresh(cfg, StageSpec::Full(cfg), fresh_ps.get());
  const double fresh_loss = RunMicrobatch(&fresh, 0, B, tokens, targets);
  fresh_ps->FinalizeGrads();

  auto ps = make_params();
  StageModelT<T> reused(cfg, StageSpec::Full(cfg), ps.get());
  // Two other micro-batches in flight at once, so two states are kept, then finished.
  const std::vector<int32_t> other1 = Draw(n, cfg.vocab_size, 3),
                             other2 = Draw(n, cfg.vocab_size, 4);
  ASSERT_TRUE(reused.Forward(0, B, other1.data(), other2.data(), nullptr, nullptr).ok());
  ASSERT_TRUE(reused.Forward(1, B, other2.data(), other1.data(), nullptr, nullptr).ok());
  for (int mb : {0, 1}) {
    ASSERT_TRUE(reused.BackwardInput(mb, 1.0, nullptr, nullptr).ok());
    ASSERT_TRUE(reused.BackwardWeight(mb).ok());
  }
  ASSERT_EQ(reused.NumSpare(), 2) << "finished states were not kept for reuse";
  ps->ZeroGrads();
  const double loss = RunMicrobatch(&reused, 2, B, tokens, targets);
  ASSERT_EQ(reused.NumSpare(), 2);  // taken by Forward and given back
  ps->FinalizeGrads();

  EXPECT_EQ(loss, fresh_loss);
  int compared = 0;
  for (const auto& p : ps->all()) {
    const ParamT<T>* f = fresh_ps->Find(p->name);
    ASSERT_NE(f, nullptr) << p->name;
    ASSERT_EQ(p->grad.size(), f->grad.size()) << p->name;
    EXPECT_EQ(std::memcmp(p->grad.data(), f->grad.data(), p->grad.size() * sizeof(T)), 0)
        << p->name << ": the gradient after reuse differs from the fresh one";
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

class StageRecycle : public ::testing::TestWithParam<Variant> {};

TEST_P(StageRecycle, ReusedStatesGiveTheFreshBitsFloat) {
  CheckRecycledMatchesFresh<float>(GetParam());
}
TEST_P(StageRecycle, ReusedStatesGiveTheFreshBitsDouble) {
  CheckRecycledMatchesFresh<double>(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Residuals, StageRecycle, ::testing::ValuesIn(AllVariants()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace xhc::model
