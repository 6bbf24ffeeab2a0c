#ifndef XHC_KERNELS_CUDA_CHECK_COMPARE_H_
#define XHC_KERNELS_CUDA_CHECK_COMPARE_H_

// How a GPU output is judged against its CPU reference. Host code only (no CUDA), so it is
// tested on every machine (compare_test), GPU or not.
//
// Two bounds, both scaled by the data's magnitude: the whole tensor's relative error
// ||gpu - ref|| / ||ref|| <= tol, and every element's |gpu - ref| <= kElementSlack * tol *
// (|ref| + rms(ref)), so a handful of badly wrong elements cannot hide in a large tensor's norm,
// while an element near zero is judged on the tensor's scale rather than its own.
// Non-finite outputs (the NaN poison of an element never written) are counted and fail.
//
// The xHC state [tokens, N, C] is judged in two parts: the k streams a token's sublayer
// writes against the reference, and the N - k it leaves alone against the input, bit for bit.
// One norm over all N would dilute an error in 4 written streams by 12 untouched ones.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/check/checks.h"

namespace xhc::cuda::check {

// Element bound relative to the norm bound: an element may be off by 4x the tolerance
// (the largest of n roughly Gaussian rounding errors is several of their RMS).
inline constexpr double kElementSlack = 4.0;

inline double Rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return v.empty() ? 0 : std::sqrt(s / double(v.size()));
}

// got vs ref over the elements `use` selects (all when `use` is empty).
inline Result CompareSelected(const std::string& name, const std::vector<float>& got,
                              const std::vector<float>& ref, const std::vector<bool>& use,
                              double tol) {
  Result r;
  r.name = name;
  r.tol = tol;
  if (got.size() != ref.size()) {
    r.note = "size mismatch: " + std::to_string(got.size()) + " vs " + std::to_string(ref.size());
    return r;
  }
  double sq = 0;
  size_t used = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (use.empty() || use[i]) sq += double(ref[i]) * ref[i], ++used;
  }
  const double rms = used ? std::sqrt(sq / double(used)) : 0;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!use.empty() && !use[i]) continue;
    if (!std::isfinite(got[i])) {
      ++r.nan_count;
      continue;
    }
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += double(ref[i]) * ref[i];
    const double allowed = kElementSlack * tol * (std::fabs(double(ref[i])) + rms);
    const double ratio = allowed > 0 ? std::fabs(d) / allowed : (d == 0 ? 0 : INFINITY);
    if (ratio > r.worst_element) r.worst_element = ratio, r.worst_index = long(i);
  }
  r.rel_err = std::sqrt(num / std::max(den, 1e-30));
  return r;
}

inline Result Compare(const std::string& name, const std::vector<float>& got,
                      const std::vector<float>& ref, double tol) {
  return CompareSelected(name, got, ref, {}, tol);
}

// The state's written / untouched split. got, ref, input: [tokens, N, C]; idx: [tokens, k],
// the streams each token's sublayer writes (empty: all N, as in dense mHC). Returns
// "<name>.written" (against ref, tolerance tol) and "<name>.untouched" (against input, exact).
inline std::vector<Result> CompareStreams(const std::string& name, const std::vector<float>& got,
                                          const std::vector<float>& ref,
                                          const std::vector<float>& input,
                                          const std::vector<int>& idx, size_t tokens, int N, int k,
                                          int C, double tol) {
  const size_t n = tokens * size_t(N) * C;
  if (got.size() != n || ref.size() != n || input.size() != n ||
      (!idx.empty() && idx.size() != tokens * size_t(k))) {
    Result r;
    r.name = name;
    r.note = "shape mismatch for a [" + std::to_string(tokens) + ", " + std::to_string(N) + ", " +
             std::to_string(C) + "] state";
    return {r};
  }
  std::vector<bool> written(n, idx.empty());
  for (size_t t = 0; t < tokens && !idx.empty(); ++t) {
    for (int j = 0; j < k; ++j) {
      const int s = idx[t * k + j];
      if (s < 0 || s >= N) {
        Result r;
        r.name = name;
        r.note = "stream index " + std::to_string(s) + " outside [0, " + std::to_string(N) + ")";
        return {r};
      }
      std::fill_n(written.begin() + (t * N + s) * C, C, true);
    }
  }
  std::vector<Result> out = {CompareSelected(name + ".written", got, ref, written, tol)};
  Result u;
  u.name = name + ".untouched";
  u.tol = 0;
  long changed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (written[i]) continue;
    if (!std::isfinite(got[i])) {
      ++u.nan_count;
    } else if (got[i] != input[i]) {
      if (changed++ == 0) u.worst_index = long(i);
    }
  }
  if (changed) u.note = std::to_string(changed) + " elements of untouched streams changed";
  out.push_back(u);
  return out;
}

}  // namespace xhc::cuda::check

#endif  // XHC_KERNELS_CUDA_CHECK_COMPARE_H_
