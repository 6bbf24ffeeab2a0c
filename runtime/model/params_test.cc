// ParamSetT's per-step gradient sweeps: ZeroGrads leaves grad_acc unfilled and the step's first
// AccumulateGrads writes it, so these tests put NaN into grad_acc after ZeroGrads: a sweep that
// read the old sum would carry it into the gradient.

#include "runtime/model/params.h"

#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace xhc::model {
namespace {

// Two tensors, one longer than a piece (so the sweeps' pieces split it).
ParamSetT<float> TwoTensors() {
  ParamSetT<float> ps;
  ps.Add("a", {3}, false);
  ps.Add("b", {2, kParamPieceElements}, true);
  return ps;
}

void SetGrads(ParamSetT<float>* ps, float base) {
  for (const auto& p : ps->all()) {
    for (size_t i = 0; i < p->grad.size(); ++i) {
      p->grad[i] = base + 0.001f * static_cast<float>(i % 97) - 0.37f * static_cast<float>(i % 5);
    }
  }
}

void PoisonSums(ParamSetT<float>* ps) {
  for (const auto& p : ps->all()) {
    std::fill(p->grad_acc.begin(), p->grad_acc.end(), std::numeric_limits<double>::quiet_NaN());
  }
}

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}

TEST(ParamSetTest, OneMicrobatchIsItsGradientWithoutReadingTheOldSum) {
  ParamSetT<float> ps = TwoTensors();
  ps.ZeroGrads();
  PoisonSums(&ps);
  SetGrads(&ps, 1.5f);
  ps.all()[0]->grad[1] = -0.0f;  // 0.0 + (-0.0) is +0.0, as when added to a zeroed sum
  std::vector<std::vector<float>> want;
  for (const auto& p : ps.all()) want.push_back(p->grad);
  want[0][1] = 0.0f;
  ps.AccumulateGrads();
  for (const auto& p : ps.all()) {
    for (float g : p->grad) ASSERT_EQ(g, 0.0f) << p->name << ": grad is a micro-batch's scratch";
  }
  ps.FinalizeGrads();
  for (size_t t = 0; t < want.size(); ++t) {
    const auto& got = ps.all()[t]->grad;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(Bits(got[i]), Bits(want[t][i])) << ps.all()[t]->name << "[" << i << "]";
    }
  }
}

TEST(ParamSetTest, MicrobatchesSumInDoubleAndAStepForgetsTheLast) {
  ParamSetT<float> ps = TwoTensors();
  for (int step = 0; step < 2; ++step) {  // step 1 must not see step 0's sum
    ps.ZeroGrads();
    PoisonSums(&ps);
    const float b1 = step == 0 ? 0.3f : -2.25f, b2 = 1e-4f;
    SetGrads(&ps, b1);
    std::vector<std::vector<float>> g1;
    for (const auto& p : ps.all()) g1.push_back(p->grad);
    ps.AccumulateGrads();
    SetGrads(&ps, b2);
    std::vector<std::vector<float>> g2;
    for (const auto& p : ps.all()) g2.push_back(p->grad);
    ps.AccumulateGrads();
    ps.FinalizeGrads();
    for (size_t t = 0; t < g1.size(); ++t) {
      const auto& got = ps.all()[t]->grad;
      for (size_t i = 0; i < got.size(); ++i) {
        const float want =
            static_cast<float>(0.0 + static_cast<double>(g1[t][i]) + static_cast<double>(g2[t][i]));
        ASSERT_EQ(Bits(got[i]), Bits(want)) << "step " << step << " " << ps.all()[t]->name;
      }
    }
  }
}

TEST(ParamSetTest, AStepWithoutMicrobatchesHasZeroGradients) {
  ParamSetT<float> ps = TwoTensors();
  SetGrads(&ps, 4.0f);
  ps.AccumulateGrads();  // a previous step's sum in grad_acc
  ps.ZeroGrads();
  PoisonSums(&ps);
  ps.FinalizeGrads();
  for (const auto& p : ps.all()) {
    for (float g : p->grad) ASSERT_EQ(Bits(g), Bits(0.0f)) << p->name;
  }
}

TEST(ParamSetTest, MaterializedSumsAreZeroThenAccumulate) {
  ParamSetT<float> ps = TwoTensors();
  ps.ZeroGrads();
  PoisonSums(&ps);
  ps.MaterializeSums();  // what the gradient exchanges read: zeros before any micro-batch
  for (const auto& p : ps.all()) {
    for (double g : p->grad_acc) ASSERT_EQ(g, 0.0) << p->name;
  }
  SetGrads(&ps, 0.75f);
  std::vector<std::vector<float>> g1;
  for (const auto& p : ps.all()) g1.push_back(p->grad);
  ps.AccumulateGrads();
  ps.MaterializeSums();  // started: leaves the sum alone
  for (size_t t = 0; t < g1.size(); ++t) {
    const auto& acc = ps.all()[t]->grad_acc;
    for (size_t i = 0; i < acc.size(); ++i) {
      ASSERT_EQ(acc[i], 0.0 + static_cast<double>(g1[t][i])) << ps.all()[t]->name;
    }
  }
}

}  // namespace
}  // namespace xhc::model
