#ifndef XHC_KERNELS_CPU_NN_TEST_UTIL_H_
#define XHC_KERNELS_CPU_NN_TEST_UTIL_H_

// Shared helpers for the nn op tests: random inputs, magnitude-scaled comparison, central
// finite differences in double, and running an op under a given thread count.

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "third_party/openblas_cblas.h"

// An op's status must be OK; otherwise the test fails naming the call and the error.
#define XHC_EXPECT_OK(expr)                                                      \
  do {                                                                           \
    const ::absl::Status xhc_expect_status_ = (expr);                            \
    EXPECT_TRUE(xhc_expect_status_.ok()) << #expr << ": " << xhc_expect_status_; \
  } while (0)

namespace xhc::nn::testing {

// Uniform in [lo, hi), bounded away from zero so no test passes on all-zero data.
inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) {
    x = dist(rng);
    if (std::fabs(x) < 1e-3f) x = 1e-3f;
  }
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Every |got − want| ≤ atol + rtol·|want|.
template <typename A, typename B>
void expect_close(const std::vector<A>& got, const std::vector<B>& want, double rtol, double atol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w))) {
      if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: got " << g << " want " << w;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

inline void expect_bitwise_equal(const std::vector<float>& a, const std::vector<float>& b,
                                 const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)))
      << what << " differs between thread counts";
}

// Checks analytic ∂loss/∂x against central differences, perturbing x in place. loss reads x.
inline void check_fd(std::vector<double>& x, const std::vector<double>& analytic,
                     const std::function<double()>& loss, const char* what, double h = 1e-5,
                     double tol = 1e-6) {
  ASSERT_EQ(x.size(), analytic.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss();
    x[i] = saved - h;
    const double down = loss();
    x[i] = saved;
    const double numeric = (up - down) / (2 * h);
    ASSERT_NEAR(analytic[i], numeric, tol * (1.0 + std::fabs(numeric))) << what << "[" << i << "]";
  }
}

// Σ w ⊙ y in double: the scalar whose gradient wrt y is w.
inline double dot(const std::vector<double>& w, const std::vector<double>& y) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += w[i] * y[i];
  return s;
}

// Runs f with both OpenMP and OpenBLAS limited to n threads.
inline void with_threads(int n, const std::function<void()>& f) {
  const int old = omp_get_max_threads();
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
  f();
  omp_set_num_threads(old);
  openblas_set_num_threads(old);
}

}  // namespace xhc::nn::testing

#endif  // XHC_KERNELS_CPU_NN_TEST_UTIL_H_
