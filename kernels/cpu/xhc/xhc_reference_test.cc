// Gradients of the reference sublayer (in double) against central finite differences, for
// the state, every parameter, and the head reduce; plus the spec's structural properties.

#include "kernels/cpu/xhc/xhc_reference.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/xhc/xhc_test_util.h"

namespace xhc::kernels {
namespace {

using testing::ParamStore;
using testing::RandomVector;

// One sublayer with F(u) = a * u + b (per channel), and loss = sum(G * X_new).
struct Problem {
  XhcConfig cfg;
  int B = 2, T = 3, C = 5;
  XhcDims d;
  ParamStore<double> params;
  std::vector<double> X, a, b, G;

  Problem(XhcConfig c, int B_, int T_, int C_, uint64_t seed)
      : cfg(std::move(c)), B(B_), T(T_), C(C_) {
    d = ResolveDims(cfg, C).value();
    std::mt19937_64 rng(seed);
    params.Init(d, rng);
    const size_t n = static_cast<size_t>(B) * T;
    X = RandomVector<double>(n * d.D(), rng);
    a = RandomVector<double>(C, rng);
    b = RandomVector<double>(C, rng);
    G = RandomVector<double>(n * d.D(), rng);
  }

  double Loss(const std::vector<double>& x) {
    XhcCacheT<double> cache;
    const size_t n = static_cast<size_t>(B) * T;
    std::vector<double> u(n * C), out(n * C), state = x;
    EXPECT_TRUE(ref::XhcPre(cfg, params.View(), B, T, C, x.data(), u.data(), &cache).ok());
    for (size_t e = 0; e < n * C; ++e) out[e] = a[e % C] * u[e] + b[e % C];
    EXPECT_TRUE(ref::XhcPost(cfg, params.View(), out.data(), state.data(), &cache).ok());
    double loss = 0;
    for (size_t e = 0; e < state.size(); ++e) loss += G[e] * state[e];
    return loss;
  }

  // Analytic gradients: dX and the parameter gradients (same names as params).
  void Gradients(std::vector<double>* dX, ParamStore<double>* grads) {
    XhcCacheT<double> cache;
    const size_t n = static_cast<size_t>(B) * T;
    std::vector<double> u(n * C), out(n * C), state = X, d_out(n * C), du(n * C);
    ASSERT_TRUE(ref::XhcPre(cfg, params.View(), B, T, C, X.data(), u.data(), &cache).ok());
    for (size_t e = 0; e < n * C; ++e) out[e] = a[e % C] * u[e] + b[e % C];
    ASSERT_TRUE(ref::XhcPost(cfg, params.View(), out.data(), state.data(), &cache).ok());
    ASSERT_TRUE(ref::XhcBackwardOut(cfg, params.View(), G.data(), &cache, d_out.data()).ok());
    for (size_t e = 0; e < n * C; ++e) du[e] = a[e % C] * d_out[e];
    *dX = G;
    ASSERT_TRUE(
        ref::XhcBackwardInput(cfg, params.View(), X.data(), du.data(), dX->data(), &cache).ok());
    *grads = params;
    for (auto& [name, v] : grads->tensors) std::fill(v.begin(), v.end(), 0.0);
    ASSERT_TRUE(
        ref::XhcBackwardWeights(cfg, params.View(), X.data(), cache, grads->GradView()).ok());
  }
};

void ExpectClose(double analytic, double fd, const std::string& what) {
  EXPECT_NEAR(analytic, fd, 1e-6 + 1e-5 * std::fabs(fd)) << what;
}

void CheckFiniteDifferences(Problem& pb, uint64_t seed) {
  std::vector<double> dX;
  ParamStore<double> grads;
  pb.Gradients(&dX, &grads);
  std::mt19937_64 rng(seed);
  const double h = 1e-5;
  for (int s = 0; s < 40; ++s) {
    const size_t e = rng() % pb.X.size();
    std::vector<double> xp = pb.X, xm = pb.X;
    xp[e] += h;
    xm[e] -= h;
    ExpectClose(dX[e], (pb.Loss(xp) - pb.Loss(xm)) / (2 * h), "X[" + std::to_string(e) + "]");
  }
  for (auto& [name, v] : pb.params.tensors) {
    const auto& g = grads.Get(name);
    for (int s = 0; s < 10; ++s) {
      const size_t e = (s == 0) ? 0 : rng() % v.size();
      const double keep = v[e];
      v[e] = keep + h;
      const double lp = pb.Loss(pb.X);
      v[e] = keep - h;
      const double lm = pb.Loss(pb.X);
      v[e] = keep;
      ExpectClose(g[e], (lp - lm) / (2 * h), name + "[" + std::to_string(e) + "]");
    }
  }
}

// Finite differences need few Sinkhorn iterations: 6.
XhcConfig Xhc(int N, int k, int m, bool mlp, std::vector<int> kernels, bool gs = true) {
  return testing::SublayerConfig(N, k, m, mlp, std::move(kernels), gs, 6);
}

TEST(XhcReferenceGradTest, AttentionSide) {
  Problem pb(Xhc(4, 2, 1, false, {}), 2, 3, 5, 11);
  CheckFiniteDifferences(pb, 1);
}
TEST(XhcReferenceGradTest, MlpSideWithConvAndGramSchmidt) {
  Problem pb(Xhc(5, 3, 1, true, {2, 3}), 2, 4, 6, 12);
  CheckFiniteDifferences(pb, 2);
}
TEST(XhcReferenceGradTest, MlpSideNoGramSchmidt) {
  Problem pb(Xhc(4, 3, 0, true, {3, 1}, false), 2, 3, 4, 13);
  CheckFiniteDifferences(pb, 3);
}
TEST(XhcReferenceGradTest, MlpSideNoKernels) {
  Problem pb(Xhc(4, 2, 2, true, {}), 3, 2, 3, 14);
  CheckFiniteDifferences(pb, 4);
}
TEST(XhcReferenceGradTest, HcOriginalHyperConnections) {
  for (bool mlp : {false, true}) {
    XhcConfig c = Xhc(4, 4, 4, mlp, {});
    c.type = ResidualType::kHc;
    Problem pb(c, 2, 3, 6, 16 + mlp);
    CheckFiniteDifferences(pb, 6 + mlp);
  }
}
TEST(XhcReferenceGradTest, MhcWithoutConvolutions) {
  XhcConfig c = Xhc(4, 4, 4, true, {});
  c.type = ResidualType::kMhc;
  Problem pb(c, 2, 3, 5, 17);
  CheckFiniteDifferences(pb, 8);
}
TEST(XhcReferenceGradTest, Mhc) {
  XhcConfig c = Xhc(3, 3, 3, true, {4});
  c.type = ResidualType::kMhc;
  Problem pb(c, 2, 2, 5, 15);
  CheckFiniteDifferences(pb, 5);
}

// xhc_flash: one whole window of w sublayers (attention, mlp, ...), each with F_q(u) = a_q u +
// b_q, loss = sum(G * X after the window). Every sublayer has its own parameters; the entry
// reads all of their pre.* (spec 4.5).
struct WindowProblem {
  int w, B, T, C;
  std::vector<XhcConfig> cfg;
  std::vector<ParamStore<double>> params;
  std::vector<std::vector<double>> a, b;
  std::vector<double> X, G;
  size_t n() const { return static_cast<size_t>(B) * T; }

  WindowProblem(int w_, int N, int k, int m, std::vector<int> kernels, int B_, int T_, int C_,
                uint64_t seed)
      : w(w_), B(B_), T(T_), C(C_) {
    std::mt19937_64 rng(seed);
    XhcDims d0;
    cfg = testing::FlashWindowConfigs(w, N, k, m, kernels, 6);
    for (int q = 0; q < w; ++q) {
      const XhcConfig& c = cfg[q];
      const XhcDims d = ResolveDims(c, C).value();
      if (q == 0) d0 = d;
      params.emplace_back();
      params.back().Init(d, rng);
      a.push_back(RandomVector<double>(C, rng));
      b.push_back(RandomVector<double>(C, rng));
    }
    X = RandomVector<double>(n() * d0.D(), rng);
    G = RandomVector<double>(n() * d0.D(), rng);
  }

  std::vector<XhcParamsT<double>> Views() { return testing::WindowViews(params); }

  // Forward over the window from x0; returns the state after it and fills the caches.
  std::vector<double> Forward(const std::vector<double>& x0, std::vector<XhcCacheT<double>>* caches,
                              std::vector<std::vector<double>>* us = nullptr) {
    const auto P = Views();
    caches->assign(w, XhcCacheT<double>());
    std::vector<double> state = x0, u(n() * C), out(n() * C);
    for (int q = 0; q < w; ++q) {
      if (q > 0) (*caches)[q].window = (*caches)[0].window;
      EXPECT_TRUE(ref::XhcPre(cfg[q], P[q], B, T, C, state.data(), u.data(), &(*caches)[q]).ok());
      if (us) us->push_back(u);
      for (size_t e = 0; e < n() * C; ++e) out[e] = a[q][e % C] * u[e] + b[q][e % C];
      EXPECT_TRUE(ref::XhcPost(cfg[q], P[q], out.data(), state.data(), &(*caches)[q]).ok());
    }
    return state;
  }

  double Loss(const std::vector<double>& x0) {
    std::vector<XhcCacheT<double>> caches;
    const auto state = Forward(x0, &caches);
    double loss = 0;
    for (size_t e = 0; e < state.size(); ++e) loss += G[e] * state[e];
    return loss;
  }

  void Gradients(std::vector<double>* dX, std::vector<ParamStore<double>>* grads) {
    std::vector<XhcCacheT<double>> caches;
    Forward(X, &caches);
    const auto P = Views();
    *dX = G;
    std::vector<double> d_out(n() * C), du(n() * C);
    for (int q = w - 1; q >= 0; --q) {
      ASSERT_TRUE(ref::XhcBackwardOut(cfg[q], P[q], dX->data(), &caches[q], d_out.data()).ok());
      for (size_t e = 0; e < n() * C; ++e) du[e] = a[q][e % C] * d_out[e];
      ASSERT_TRUE(
          ref::XhcBackwardInput(cfg[q], P[q], X.data(), du.data(), dX->data(), &caches[q]).ok());
    }
    *grads = params;
    for (int q = 0; q < w; ++q) {
      for (auto& [name, v] : (*grads)[q].tensors) std::fill(v.begin(), v.end(), 0.0);
      ASSERT_TRUE(
          ref::XhcBackwardWeights(cfg[q], P[q], X.data(), caches[q], (*grads)[q].GradView()).ok());
    }
  }
};

void CheckWindowFiniteDifferences(WindowProblem& pb, uint64_t seed) {
  std::vector<double> dX;
  std::vector<ParamStore<double>> grads;
  pb.Gradients(&dX, &grads);
  std::mt19937_64 rng(seed);
  const double h = 1e-5;
  for (int s = 0; s < 40; ++s) {
    const size_t e = rng() % pb.X.size();
    std::vector<double> xp = pb.X, xm = pb.X;
    xp[e] += h;
    xm[e] -= h;
    ExpectClose(dX[e], (pb.Loss(xp) - pb.Loss(xm)) / (2 * h), "X0[" + std::to_string(e) + "]");
  }
  for (int q = 0; q < pb.w; ++q) {
    for (auto& [name, v] : pb.params[q].tensors) {
      const auto& g = grads[q].Get(name);
      for (int s = 0; s < 8; ++s) {
        const size_t e = (s == 0) ? 0 : rng() % v.size();
        const double keep = v[e];
        v[e] = keep + h;
        const double lp = pb.Loss(pb.X);
        v[e] = keep - h;
        const double lm = pb.Loss(pb.X);
        v[e] = keep;
        ExpectClose(g[e], (lp - lm) / (2 * h),
                    "sublayer " + std::to_string(q) + " " + name + "[" + std::to_string(e) + "]");
      }
    }
  }
}

TEST(XhcReferenceGradTest, FlashWindowOfTwo) {
  WindowProblem pb(2, 6, 3, 1, {2, 3}, 2, 4, 5, 31);
  CheckWindowFiniteDifferences(pb, 9);
}
TEST(XhcReferenceGradTest, FlashWindowOfFourNoKernels) {
  WindowProblem pb(4, 5, 2, 1, {}, 2, 3, 4, 32);
  CheckWindowFiniteDifferences(pb, 10);
}
TEST(XhcReferenceGradTest, FlashWindowOfFourAllFixed) {
  WindowProblem pb(4, 4, 3, 0, {3}, 1, 5, 4, 33);
  CheckWindowFiniteDifferences(pb, 11);
}

// Spec 4.5: sublayer q of a window reads the CURRENT state through the entry-time map.
TEST(XhcReferenceFlashTest, SublayerInputIsTheDenseReadOfTheCurrentState) {
  WindowProblem pb(4, 6, 3, 2, {2}, 2, 3, 5, 34);
  std::vector<XhcCacheT<double>> caches;
  std::vector<std::vector<double>> us;
  const auto P = pb.Views();
  pb.Forward(pb.X, &caches, &us);
  // Replay, checking u_q against sum_i hpre_q,i X_q,i with hpre from X0 and X_q the state
  // before sublayer q; only the k active streams of X0 may differ from X_q.
  std::vector<double> state = pb.X, u(pb.n() * pb.C), out(u.size());
  const int N = 6, C = pb.C, D = N * C;
  const auto& win = *caches[0].window;
  for (int q = 0; q < 4; ++q) {
    for (size_t tok = 0; tok < pb.n(); ++tok) {
      for (int c = 0; c < C; ++c) {
        double acc = 0;
        for (int i = 0; i < N; ++i)
          acc += win.hpre[(tok * 4 + q) * N + i] * state[tok * D + i * C + c];
        EXPECT_NEAR(us[q][tok * C + c], acc, 1e-12);
      }
      for (int i = 0; i < N; ++i) {
        bool active = false;
        for (int j = 0; j < 3; ++j) active |= win.idx[tok * 3 + j] == i;
        if (active) continue;
        for (int c = 0; c < C; ++c)
          ASSERT_EQ(state[tok * D + i * C + c], pb.X[tok * D + i * C + c]);
      }
    }
    XhcCacheT<double> cache;
    cache.window = caches[0].window;
    if (q == 0) cache.window = nullptr;
    ASSERT_TRUE(ref::XhcPre(pb.cfg[q], P[q], pb.B, pb.T, C, state.data(), u.data(), &cache).ok());
    if (q == 0) caches[0].window = cache.window;  // the replay's own entry decides identically
    for (size_t e = 0; e < u.size(); ++e) out[e] = pb.a[q][e % C] * u[e] + pb.b[q][e % C];
    ASSERT_TRUE(ref::XhcPost(pb.cfg[q], P[q], out.data(), state.data(), &cache).ok());
  }
}

TEST(HeadReduceReferenceGradTest, FiniteDifferences) {
  const int n = 3, N = 4, C = 5, D = N * C;
  std::mt19937_64 rng(21);
  auto X = RandomVector<double>(n * D, rng), G = RandomVector<double>(n * C, rng);
  auto w = RandomVector<double>(N * D, rng, 0.3), bias = RandomVector<double>(N, rng);
  std::vector<double> alpha = {0.7};
  auto loss = [&](const std::vector<double>& x) {
    HeadCacheT<double> cache;
    std::vector<double> y(n * C);
    EXPECT_TRUE(ref::HeadReduceForward<double>({w.data(), bias.data(), alpha.data()}, n, N, C,
                                               x.data(), y.data(), &cache)
                    .ok());
    double l = 0;
    for (int e = 0; e < n * C; ++e) l += G[e] * y[e];
    return l;
  };
  HeadCacheT<double> cache;
  std::vector<double> y(n * C), dX(n * D), gw(N * D, 0), gb(N, 0), ga(1, 0);
  HeadParamsT<double> P{w.data(), bias.data(), alpha.data()};
  ASSERT_TRUE(ref::HeadReduceForward(P, n, N, C, X.data(), y.data(), &cache).ok());
  ASSERT_TRUE(ref::HeadReduceBackwardInput(P, n, N, C, X.data(), G.data(), &cache, dX.data()).ok());
  ASSERT_TRUE(ref::HeadReduceBackwardWeights(P, n, N, C, X.data(), cache,
                                             HeadGradsT<double>{gw.data(), gb.data(), ga.data()})
                  .ok());
  const double h = 1e-5;
  auto fd = [&](double* v, int e) {
    const double keep = v[e];
    v[e] = keep + h;
    const double lp = loss(X);
    v[e] = keep - h;
    const double lm = loss(X);
    v[e] = keep;
    return (lp - lm) / (2 * h);
  };
  for (int e = 0; e < n * D; e += 7) ExpectClose(dX[e], fd(X.data(), e), "X");
  for (int e = 0; e < N * D; e += 5) ExpectClose(gw[e], fd(w.data(), e), "weight");
  for (int e = 0; e < N; ++e) ExpectClose(gb[e], fd(bias.data(), e), "bias");
  ExpectClose(ga[0], fd(alpha.data(), 0), "alpha");
  std::vector<double> de(n * C);
  ref::ExpandBackward(n, N, C, dX.data(), de.data());
  std::vector<double> Xe(n * D);
  ref::ExpandForward(n, N, C, de.data(), Xe.data());
  EXPECT_EQ(Xe[D + 2 * C + 1], de[C + 1]);
}

}  // namespace
}  // namespace xhc::kernels
