// Gradients of the reference sublayer (in double) against central finite differences, for
// the state, every parameter, and the head reduce; plus the spec's structural properties.

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/xhc/xhc_reference.h"
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

  Problem(XhcConfig c, int B_, int T_, int C_, uint64_t seed) : cfg(std::move(c)), B(B_), T(T_), C(C_) {
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
    ASSERT_TRUE(ref::XhcBackwardInput(cfg, params.View(), X.data(), du.data(), dX->data(), &cache).ok());
    *grads = params;
    for (auto& [name, v] : grads->tensors) std::fill(v.begin(), v.end(), 0.0);
    ASSERT_TRUE(ref::XhcBackwardWeights(cfg, params.View(), X.data(), cache, grads->GradView()).ok());
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

XhcConfig Xhc(int N, int k, int m, bool mlp, std::vector<int> kernels, bool gs = true) {
  XhcConfig c;
  c.n_streams = N, c.n_active = k, c.n_fixed = m, c.is_mlp = mlp;
  c.conv_kernels = std::move(kernels);
  c.gram_schmidt = gs;
  c.sinkhorn_iters = 6;
  return c;
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
                                               x.data(), y.data(), &cache).ok());
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
                                             HeadGradsT<double>{gw.data(), gb.data(), ga.data()}).ok());
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
