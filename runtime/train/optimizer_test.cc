// The optimizer's sweeps run over ParamSetT's pieces in one parallel region; these tests hold
// them to the per-tensor kernels they replaced, bit for bit, on tensors that end exactly at,
// just before and just after a piece boundary (and empty and scalar ones).

#include "runtime/train/optimizer.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/test_seed.h"
#include "gtest/gtest.h"
#include "kernels/cpu/nn/adamw.h"
#include "runtime/model/params.h"

namespace xhc::train {
namespace {

constexpr int64_t kPiece = model::kParamPieceElements;

model::ParamSetT<float> RandomParams(uint64_t seed) {
  model::ParamSetT<float> ps;
  const std::vector<int64_t> sizes = {1, 0, kPiece - 1, kPiece, kPiece + 1, 3 * kPiece + 17, 5};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto* p = ps.Add("t" + std::to_string(i), {sizes[i]}, /*decay=*/i % 2 == 0);
    for (auto& v : p->value) v = normal(rng);
    for (auto& g : p->grad) g = normal(rng) * 1e-2f;
  }
  return ps;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  // memcmp's pointers must not be null, even for 0 bytes (an empty tensor's data() is).
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(OptimizerTest, PiecesCoverEveryElementOnceInOrder) {
  const auto ps = RandomParams(xhc::testing::TestSeed());
  size_t k = 0;
  for (const auto& p : ps.all()) {
    for (int64_t begin = 0; begin < p->numel(); begin += kPiece, ++k) {
      ASSERT_LT(k, ps.pieces().size());
      EXPECT_EQ(ps.pieces()[k].param, p.get());
      EXPECT_EQ(ps.pieces()[k].begin, begin);
      EXPECT_EQ(ps.pieces()[k].end, std::min(p->numel(), begin + kPiece));
    }
  }
  EXPECT_EQ(k, ps.pieces().size());
}

TEST(OptimizerTest, GradSumOfSquaresIsThePerTensorSum) {
  const auto ps = RandomParams(xhc::testing::TestSeed());
  double expected = 0;
  for (const auto& p : ps.all()) expected += nn::SumOfSquares(p->grad.data(), p->numel());
  const double got = GradSumOfSquares(ps);
  EXPECT_EQ(std::memcmp(&got, &expected, sizeof(double)), 0) << got << " vs " << expected;
}

TEST(OptimizerTest, ApplyAdamWIsThePerTensorUpdate) {
  const uint64_t seed = xhc::testing::TestSeed();
  auto ps = RandomParams(seed);
  auto expected = RandomParams(seed);
  OptimConfig optim;
  optim.lr = 3e-3;
  optim.grad_clip = 1.0;
  const double norm = std::sqrt(GradSumOfSquares(ps)) * 4;  // clipping active
  for (int64_t step = 0; step < 3; ++step) {
    const StepStats stats = ApplyAdamW(optim, 100, step, norm, &ps);
    nn::AdamWOptions opt;
    opt.beta1 = static_cast<float>(optim.beta1);
    opt.beta2 = static_cast<float>(optim.beta2);
    opt.eps = static_cast<float>(optim.eps);
    opt.weight_decay = static_cast<float>(optim.weight_decay);
    for (const auto& p : expected.all()) {
      p->exp_avg.resize(p->value.size());
      p->exp_avg_sq.resize(p->value.size());
      EXPECT_TRUE(nn::AdamwStep(p->value.data(), p->grad.data(), p->exp_avg.data(),
                                p->exp_avg_sq.data(), p->numel(), step + 1,
                                static_cast<float>(stats.lr), p->decay,
                                static_cast<float>(stats.clip), opt)
                      .ok());
    }
  }
  for (size_t i = 0; i < ps.all().size(); ++i) {
    EXPECT_TRUE(SameBits(ps.all()[i]->value, expected.all()[i]->value)) << ps.all()[i]->name;
    EXPECT_TRUE(SameBits(ps.all()[i]->exp_avg_sq, expected.all()[i]->exp_avg_sq));
  }
}

TEST(OptimizerTest, AccumulateAndFinalizeSumMicroBatchesInDouble) {
  const uint64_t seed = xhc::testing::TestSeed();
  auto ps = RandomParams(seed);
  std::vector<std::vector<double>> expected;
  for (const auto& p : ps.all()) expected.emplace_back(p->grad.begin(), p->grad.end());
  ps.AccumulateGrads();
  for (const auto& p : ps.all()) {
    for (float g : p->grad) ASSERT_EQ(g, 0.0f) << "AccumulateGrads leaves grad zeroed";
  }
  std::mt19937_64 rng(seed + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < ps.all().size(); ++i) {
    auto& p = *ps.all()[i];
    for (size_t j = 0; j < p.grad.size(); ++j) {
      p.grad[j] = normal(rng);
      expected[i][j] += double{p.grad[j]};
    }
  }
  ps.AccumulateGrads();
  ps.FinalizeGrads();
  for (size_t i = 0; i < ps.all().size(); ++i) {
    for (size_t j = 0; j < expected[i].size(); ++j) {
      ASSERT_EQ(ps.all()[i]->grad[j], static_cast<float>(expected[i][j])) << i << "," << j;
    }
  }
  // A new step forgets this one's sum (ZeroGrads leaves grad_acc to the step's first
  // AccumulateGrads: runtime/model/params_test.cc).
  ps.ZeroGrads();
  for (const auto& p : ps.all()) {
    for (float g : p->grad) ASSERT_EQ(g, 0.0f) << "ZeroGrads zeroes grad";
  }
  ps.FinalizeGrads();
  for (const auto& p : ps.all()) {
    for (float g : p->grad) ASSERT_EQ(g, 0.0f) << "a step without micro-batches sums to zero";
  }
}

}  // namespace
}  // namespace xhc::train
