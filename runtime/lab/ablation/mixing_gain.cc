#include "runtime/lab/ablation/mixing_gain.h"

#include <algorithm>
#include <cmath>

namespace xhc::ablation {

std::vector<double> EmbedActive(int N, int k, const int* idx, const float* hres) {
  std::vector<double> m(static_cast<size_t>(N) * N, 0.0);
  for (int i = 0; i < N; ++i) m[i * N + i] = 1.0;
  for (int j = 0; j < k; ++j) {
    double* row = &m[static_cast<size_t>(idx[j]) * N];
    std::fill(row, row + N, 0.0);
    for (int jj = 0; jj < k; ++jj) row[idx[jj]] += hres[j * k + jj];
  }
  return m;
}

CompositeMixing::CompositeMixing(int num_tokens, int num_streams)
    : n_(num_tokens),
      N_(num_streams),
      p_(static_cast<size_t>(num_tokens) * num_streams * num_streams) {
  for (int t = 0; t < n_; ++t) {
    for (int i = 0; i < N_; ++i) p_[(static_cast<size_t>(t) * N_ + i) * N_ + i] = 1.0;
  }
}

void CompositeMixing::Apply(const std::vector<double>& m) {
  const size_t NN = static_cast<size_t>(N_) * N_;
  std::vector<double> out(NN);
  for (int t = 0; t < n_; ++t) {
    const double* a = &m[t * NN];
    double* p = &p_[t * NN];
    for (int i = 0; i < N_; ++i) {
      for (int j = 0; j < N_; ++j) {
        double s = 0;
        for (int l = 0; l < N_; ++l) s += a[i * N_ + l] * p[l * N_ + j];
        out[i * N_ + j] = s;
      }
    }
    std::copy(out.begin(), out.end(), p);
  }
}

MixingStats CompositeMixing::Stats() const {
  MixingStats s;
  const size_t NN = static_cast<size_t>(N_) * N_;
  double diag = 0;
  for (int t = 0; t < n_; ++t) {
    const double* p = &p_[t * NN];
    double row_max = 0, col_max = 0;
    for (int i = 0; i < N_; ++i) {
      double row = 0, col = 0;
      for (int j = 0; j < N_; ++j) row += std::abs(p[i * N_ + j]), col += std::abs(p[j * N_ + i]);
      row_max = std::max(row_max, row);
      col_max = std::max(col_max, col);
      diag += p[i * N_ + i];
    }
    s.forward_max = std::max(s.forward_max, row_max);
    s.backward_max = std::max(s.backward_max, col_max);
    s.forward_mean += row_max / n_;
    s.backward_mean += col_max / n_;
  }
  s.self_share = diag / (static_cast<double>(n_) * N_);
  return s;
}

}  // namespace xhc::ablation
