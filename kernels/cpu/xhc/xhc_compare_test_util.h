#ifndef XHC_KERNELS_CPU_XHC_XHC_COMPARE_TEST_UTIL_H_
#define XHC_KERNELS_CPU_XHC_XHC_COMPARE_TEST_UTIL_H_

// Test helpers shared by the optimized-vs-reference tests (xhc_ops_test, xhc_flash_ops_test):
// both paths behind one interface, the configurations, and the comparisons (tolerances that
// scale with a tensor, alphas at the size of their terms, redraws of near-ties in the routing).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_reference.h"
#include "kernels/cpu/xhc/xhc_test_util.h"

namespace xhc::kernels::testing {

struct RefImpl {
  template <typename... A>
  static absl::Status Pre(A... a) {
    return ref::XhcPre(a...);
  }
  template <typename... A>
  static absl::Status Post(A... a) {
    return ref::XhcPost(a...);
  }
  template <typename... A>
  static absl::Status Out(A... a) {
    return ref::XhcBackwardOut(a...);
  }
  template <typename... A>
  static absl::Status In(A... a) {
    return ref::XhcBackwardInput(a...);
  }
  template <typename... A>
  static absl::Status W(A... a) {
    return ref::XhcBackwardWeights(a...);
  }
};
struct OptImpl {
  template <typename... A>
  static absl::Status Pre(A... a) {
    return XhcPre(a...);
  }
  template <typename... A>
  static absl::Status Post(A... a) {
    return XhcPost(a...);
  }
  template <typename... A>
  static absl::Status Out(A... a) {
    return XhcBackwardOut(a...);
  }
  template <typename... A>
  static absl::Status In(A... a) {
    return XhcBackwardInput(a...);
  }
  template <typename... A>
  static absl::Status W(A... a) {
    return XhcBackwardWeights(a...);
  }
};

// The sublayer configurations these tests compare: 20 Sinkhorn iterations.
inline XhcConfig MakeCfg(int N, int k, int m, bool mlp, std::vector<int> kernels = {2, 5},
                         bool gs = true) {
  return SublayerConfig(N, k, m, mlp, std::move(kernels), gs, 20);
}

// |opt - ref| <= tol * (max |ref| over the tensor + |ref element|): a tolerance that scales
// with the tensor's magnitude (float vs double), plus 1e-5 absolute for sums that cancel
// (alpha gradients over many tokens).
inline void ExpectMatches(const std::vector<float>& opt, const std::vector<double>& ref,
                          const std::string& what, double tol = 2e-4) {
  ASSERT_EQ(opt.size(), ref.size()) << what;
  double scale = 0;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  int bad = 0;
  for (size_t e = 0; e < ref.size() && bad < 5; ++e) {
    if (std::fabs(opt[e] - ref[e]) > tol * (scale + std::fabs(ref[e])) + 1e-5) {
      ADD_FAILURE() << what << "[" << e << "]: opt " << opt[e] << " ref " << ref[e];
      ++bad;
    }
  }
}

// The scalar alpha of a sigmoid / Sinkhorn map (z = alpha * r * (x . W) + b, spec 2.3; not
// hc's tanh maps) has dL/dalpha = <dL/dW, W> / alpha: a sum over tokens and streams whose
// terms can cancel to far below their size, so float rounding of the TERMS sets its error,
// not its own value (with the tensor's own scale the flash grid failed 6 of 300 seeds,
// always on an alpha). Returns that size, sum |dL/dW| |W| / |alpha|, after
// checking the identity on the double reference (1e-9 of the size: the reference's alpha
// and weight gradients must agree), or 0 when `name` is no such alpha.
inline double AlphaTermScale(const std::string& name, const ParamStore<double>& grads,
                             const ParamStore<double>& params) {
  static const std::pair<const char*, const char*> kPairs[] = {
      {"pre.alpha", "pre.weight"}, {"res.alpha", "res.weight"}, {"post.alpha", "post.weight"}};
  for (const auto& [alpha, weight] : kPairs) {
    if (name != alpha) continue;
    const std::vector<double>* g = grads.Find(weight);
    const std::vector<double>* w = params.Find(weight);
    const std::vector<double>* ga = grads.Find(alpha);
    const std::vector<double>* a = params.Find(alpha);
    if (!g || !w || !ga || !a || g->size() != w->size() || ga->size() != 1 || a->size() != 1) {
      ADD_FAILURE() << name << ": no matching " << weight << " to scale it by";
      return 0;
    }
    double dot = 0, size = 0;
    for (size_t e = 0; e < g->size(); ++e) {
      dot += (*g)[e] * (*w)[e];
      size += std::fabs((*g)[e] * (*w)[e]);
    }
    const double scale = size / std::fabs((*a)[0]);
    EXPECT_NEAR(dot / (*a)[0], (*ga)[0], 1e-9 * scale + 1e-15)
        << name << ": reference alpha gradient != <dL/dW, W> / alpha";
    return scale;
  }
  return 0;
}

// A scalar alpha gradient against the reference's at the size of its terms (`terms`: their
// sum of magnitudes, or a bound on it): the largest error seen over 61 seeds of both xhc
// grids was 1.9e-6 of it, the ratio of the terms' size to the value up to 5.5e6.
inline void ExpectAlphaMatches(const std::vector<float>& opt, double ref, double terms,
                               const std::string& what) {
  constexpr double kTol = 2e-5;
  ASSERT_EQ(opt.size(), 1u) << what;
  EXPECT_LE(std::fabs(opt[0] - ref), kTol * (terms + std::fabs(ref)) + 1e-7)
      << what << ": opt " << opt[0] << " ref " << ref << ", terms of size " << terms;
}

// A gradient tensor of the optimized path against the reference's (ExpectMatches), alphas of
// the sigmoid maps at the size of their terms (AlphaTermScale).
inline void ExpectGradMatches(const std::vector<float>& opt, const std::string& name,
                              const ParamStore<double>& ref_grads,
                              const ParamStore<double>& ref_params, bool sigmoid_maps,
                              const std::string& what) {
  const std::vector<double>& ref = *ref_grads.Find(name);
  const double terms = sigmoid_maps ? AlphaTermScale(name, ref_grads, ref_params) : 0;
  if (terms == 0) return ExpectMatches(opt, ref, what);
  ExpectAlphaMatches(opt, ref[0], terms, what);
}

// Whether the two paths' active sets differ only where the reference's router scores of the
// streams they disagree on are within float rounding of each other (a near-tie: which one
// float picks is not an error). Any other difference is reported as a failure.
inline bool OnlyNearTies(const std::vector<int>& ref_idx, const std::vector<int>& opt_idx,
                         const std::vector<double>& ref_s, int N, int k) {
  constexpr double kTie = 1e-5;  // scores in (0, 1); float error of a score ~1e-7
  const size_t n = ref_idx.size() / k;
  bool ties_only = true;
  for (size_t t = 0; t < n; ++t) {
    const auto in = [&](const std::vector<int>& idx, int stream) {  // stream in token t's set
      const auto first = idx.begin() + t * k, last = first + k;
      return std::find(first, last, stream) != last;
    };
    std::vector<int> only_ref, only_opt;
    for (int j = 0; j < k; ++j) {
      const int r = ref_idx[t * k + j], o = opt_idx[t * k + j];
      if (!in(opt_idx, r)) only_ref.push_back(r);
      if (!in(ref_idx, o)) only_opt.push_back(o);
    }
    for (int a : only_ref) {
      for (int b : only_opt) ties_only &= std::fabs(ref_s[t * N + a] - ref_s[t * N + b]) <= kTie;
    }
  }
  return ties_only;
}

// A draw whose active sets differ by a near-tie is redrawn (seed + attempt * 0x9E37...):
// at most kDraws draws per case, each printed.
inline constexpr int kDraws = 4;
inline constexpr uint64_t kRedraw = 0x9E3779B97F4A7C15ull;

// Runs try_draw(seed), redrawing while it returns false (a near-tie in the routing, nothing
// compared).
inline void RedrawNearTies(uint64_t seed, const std::function<bool(uint64_t)>& try_draw) {
  for (int draw = 0; draw < kDraws; ++draw) {
    if (try_draw(seed + draw * kRedraw)) return;
    std::printf("[near tie] routing of draw %d within float rounding: redrawn\n", draw);
  }
  ADD_FAILURE() << kDraws << " draws in a row with near-ties";
}

}  // namespace xhc::kernels::testing

#endif  // XHC_KERNELS_CPU_XHC_XHC_COMPARE_TEST_UTIL_H_
