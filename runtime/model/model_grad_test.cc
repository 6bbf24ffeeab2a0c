// Whole-model gradients against central finite differences, in double precision (the
// double model runs the reference kernels), for vanilla, mhc and xhc; and the float model
// against the double one.
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "runtime/model/stage.h"
#include "runtime/model/tiny_model_test_util.h"

namespace xhc::model {
namespace {

struct Batch {
  int B = 2;
  std::vector<int32_t> tokens, targets;
};

Batch MakeBatch(const ModelConfig& c, uint32_t seed) {
  Batch b;
  std::mt19937 rng(seed);
  for (int i = 0; i < b.B * c.seq_len; ++i) {
    b.tokens.push_back(static_cast<int32_t>(rng() % c.vocab_size));
    b.targets.push_back(static_cast<int32_t>(rng() % c.vocab_size));
  }
  return b;
}

// Perturbs every parameter away from its (often degenerate: zero conv kernels, 0/−4
// biases) initial value so every gradient path is exercised.
template <typename T>
void Perturb(ParamSetT<T>* ps, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> nd(0.0, 0.3);
  for (auto& p : ps->all()) {
    for (auto& v : p->value) v += static_cast<T>(static_cast<float>(nd(rng)));
  }
}

double Loss(StageModelT<double>& m, const Batch& b) {
  return *m.ForwardOnly(b.B, b.tokens.data(), b.targets.data(), nullptr, nullptr, nullptr);
}

class ModelGrad : public ::testing::TestWithParam<Variant> {};

TEST_P(ModelGrad, MatchesFiniteDifferencesInDouble) {
  const ModelConfig cfg = Tiny(GetParam());
  ParamSetT<double> ps = BuildStageParams<double>(cfg, StageSpec::Full(cfg));
  InitParams(cfg, 7, &ps);
  Perturb(&ps, 11);
  StageModelT<double> m(cfg, StageSpec::Full(cfg), &ps);
  const Batch b = MakeBatch(cfg, 3);
  ASSERT_TRUE(m.Forward(0, b.B, b.tokens.data(), b.targets.data(), nullptr, nullptr).ok());
  ASSERT_TRUE(m.BackwardInput(0, 1.0, nullptr, nullptr).ok());
  ASSERT_TRUE(m.BackwardWeight(0).ok());
  ps.FinalizeGrads();
  int checked = 0;
  for (auto& p : ps.all()) {
    // A few elements per tensor keep the test fast while touching every tensor.
    for (int64_t i = 0; i < p->numel(); i += std::max<int64_t>(1, p->numel() / 3)) {
      const double saved = p->value[i], h = 1e-5;
      p->value[i] = saved + h;
      const double up = Loss(m, b);
      p->value[i] = saved - h;
      const double down = Loss(m, b);
      p->value[i] = saved;
      const double fd = (up - down) / (2 * h);
      EXPECT_NEAR(p->grad[i], fd, 1e-6 + 1e-4 * std::fabs(fd)) << p->name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 40);
}

TEST_P(ModelGrad, FloatModelMatchesDoubleModel) {
  const ModelConfig cfg = Tiny(GetParam());
  ParamSetT<double> pd = BuildStageParams<double>(cfg, StageSpec::Full(cfg));
  ParamSetT<float> pf = BuildStageParams<float>(cfg, StageSpec::Full(cfg));
  InitParams(cfg, 7, &pd);
  InitParams(cfg, 7, &pf);
  Perturb(&pd, 11);
  Perturb(&pf, 11);
  StageModelT<double> md(cfg, StageSpec::Full(cfg), &pd);
  StageModelT<float> mf(cfg, StageSpec::Full(cfg), &pf);
  const Batch b = MakeBatch(cfg, 5);
  const double ld = *md.Forward(0, b.B, b.tokens.data(), b.targets.data(), nullptr, nullptr);
  const double lf = *mf.Forward(0, b.B, b.tokens.data(), b.targets.data(), nullptr, nullptr);
  EXPECT_NEAR(lf, ld, 1e-5 * std::fabs(ld));
  ASSERT_TRUE(md.BackwardInput(0, 1.0, nullptr, nullptr).ok() && md.BackwardWeight(0).ok());
  ASSERT_TRUE(mf.BackwardInput(0, 1.0, nullptr, nullptr).ok() && mf.BackwardWeight(0).ok());
  pd.FinalizeGrads();
  pf.FinalizeGrads();
  for (size_t t = 0; t < pd.all().size(); ++t) {
    const auto& gd = pd.all()[t]->grad;
    const auto& gf = pf.all()[t]->grad;
    double num = 0, den = 0;
    for (size_t i = 0; i < gd.size(); ++i) {
      num += (gd[i] - gf[i]) * (gd[i] - gf[i]);
      den += gd[i] * gd[i];
    }
    EXPECT_LE(std::sqrt(num), 1e-3 * std::sqrt(den) + 1e-7) << pd.all()[t]->name;
  }
}

INSTANTIATE_TEST_SUITE_P(Residuals, ModelGrad, ::testing::ValuesIn(AllVariants()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace xhc::model
