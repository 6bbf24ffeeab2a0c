// The last weight pass of a step handed over group by group (BackwardWeight with a
// ParamsDone, as DualPipe's mirror exchange runs it): every parameter handed over exactly
// once, its sum already final when handed over (nothing later in the pass changes it), and
// the step's sums the same bits as the plain pass. For every residual variant, on the first
// stage (embedding), the last (head) and the whole model, after one or two micro-batches.
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/stage.h"
#include "runtime/model/tiny_model_test_util.h"

namespace xhc::model {
namespace {

bool SameBits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

enum class Kind { kFirst, kLast, kWhole };

class GroupedWeightPass
    : public ::testing::TestWithParam<std::tuple<Variant, Kind, int /*micro-batches*/>> {};

TEST_P(GroupedWeightPass, HandsEachParameterOverOnceWithItsFinalSum) {
  const auto [variant, kind, microbatches] = GetParam();
  const ModelConfig cfg = Tiny(variant, /*n_layers=*/4);  // xhc_flash4: a window per 2 layers
  const StageSpec spec = kind == Kind::kFirst  ? StageSpec{0, 2, true, false}
                         : kind == Kind::kLast ? StageSpec{2, 2, false, true}
                                               : StageSpec::Full(cfg);
  const int B = 2, n = B * cfg.seq_len;

  ParamSetT<float> plain_ps = BuildStageParams<float>(cfg, spec);
  ParamSetT<float> grouped_ps = BuildStageParams<float>(cfg, spec);
  InitParams(cfg, 7, &plain_ps);
  InitParams(cfg, 7, &grouped_ps);
  StageModel plain(cfg, spec, &plain_ps), grouped(cfg, spec, &grouped_ps);
  plain_ps.ZeroGrads();
  grouped_ps.ZeroGrads();

  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  const size_t state = static_cast<size_t>(plain.StateElements(B));
  std::set<const ParamT<float>*> handed;
  std::map<const ParamT<float>*, std::vector<double>> at_hand_over;
  for (int mb = 0; mb < microbatches; ++mb) {
    std::vector<int32_t> tokens(n), targets(n);
    for (int i = 0; i < n; ++i) {
      tokens[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
      targets[i] = static_cast<int32_t>(rng() % cfg.vocab_size);
    }
    std::vector<float> x_in(state), dx_out(state), x_out(state), dx_in(state);
    for (float& v : x_in) v = nd(rng);
    for (float& v : dx_out) v = nd(rng);
    for (StageModel* m : {&plain, &grouped}) {
      ASSERT_TRUE(m->Forward(mb, B, tokens.data(), targets.data(),
                             spec.has_embed ? nullptr : x_in.data(),
                             spec.has_head ? nullptr : x_out.data())
                      .ok());
      ASSERT_TRUE(m->BackwardInput(mb, 0.5, spec.has_head ? nullptr : dx_out.data(),
                                   spec.has_embed ? nullptr : dx_in.data())
                      .ok());
    }
    ASSERT_TRUE(plain.BackwardWeight(mb).ok());
    if (mb + 1 < microbatches) {
      ASSERT_TRUE(grouped.BackwardWeight(mb).ok());
      continue;
    }
    const absl::Status s =
        grouped.BackwardWeight(mb, [&](const std::vector<ParamT<float>*>& group) {
          EXPECT_FALSE(group.empty());
          for (ParamT<float>* p : group) {
            EXPECT_TRUE(handed.insert(p).second) << p->name << " handed over twice";
            at_hand_over[p] = p->grad_acc;
          }
          return absl::OkStatus();
        });
    ASSERT_TRUE(s.ok()) << s;
  }

  EXPECT_EQ(handed.size(), grouped_ps.all().size());
  for (size_t i = 0; i < grouped_ps.all().size(); ++i) {
    const ParamT<float>& g = *grouped_ps.all()[i];
    const ParamT<float>& p = *plain_ps.all()[i];
    ASSERT_TRUE(at_hand_over.count(&g)) << g.name << " never handed over";
    EXPECT_TRUE(SameBits(at_hand_over[&g], g.grad_acc)) << g.name << " changed after hand-over";
    EXPECT_TRUE(SameBits(g.grad_acc, p.grad_acc)) << g.name << ": sums differ from the plain pass";
  }
  // The pass is closed as AccumulateGrads closes it: a sum read now is the step's.
  grouped_ps.FinalizeGrads();
  plain_ps.FinalizeGrads();
  for (size_t i = 0; i < grouped_ps.all().size(); ++i) {
    const auto& g = grouped_ps.all()[i]->grad;
    const auto& p = plain_ps.all()[i]->grad;
    EXPECT_EQ(std::memcmp(g.data(), p.data(), g.size() * sizeof(float)), 0)
        << grouped_ps.all()[i]->name;
  }
}

INSTANTIATE_TEST_SUITE_P(Residuals, GroupedWeightPass,
                         ::testing::Combine(::testing::ValuesIn(AllVariants()),
                                            ::testing::Values(Kind::kFirst, Kind::kLast,
                                                              Kind::kWhole),
                                            ::testing::Values(1, 2)),
                         [](const auto& info) {
                           const Kind kind = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param).name) +
                                  (kind == Kind::kFirst  ? "_first"
                                   : kind == Kind::kLast ? "_last"
                                                         : "_whole") +
                                  "_" + std::to_string(std::get<2>(info.param)) + "mb";
                         });

}  // namespace
}  // namespace xhc::model
