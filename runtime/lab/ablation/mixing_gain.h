#ifndef XHC_RUNTIME_LAB_ABLATION_MIXING_GAIN_H_
#define XHC_RUNTIME_LAB_ABLATION_MIXING_GAIN_H_

// The composite residual map of the mHC paper's stability analysis: per token, the product
// P = M_q · … · M_1 of every sublayer's effective N × N stream-mixing matrix (row = output
// stream, column = input stream; the write term F(u) is not part of it). Its forward gain is
// the largest absolute row sum of P (how much a signal can grow from the embedding to the
// head), its backward gain the largest absolute column sum (the same for gradients), and its
// self-share the mean of its diagonal (how much of each stream stays in that stream).

#include <vector>

namespace xhc::ablation {

struct MixingStats {
  double forward_max = 0, forward_mean = 0;    // over tokens: max / mean of max |row sum|
  double backward_max = 0, backward_mean = 0;  // over tokens: max / mean of max |col sum|
  double self_share = 0;                       // mean over tokens and streams of P[i][i]
};

// The effective N × N matrix (row-major) of a sublayer that mixes the k active streams idx
// with the k × k matrix hres (row-major, output slot × input slot) and passes the others
// through: identity, with rows idx_j replaced by sum_j' hres[j][j'] e_{idx_j'}.
std::vector<double> EmbedActive(int N, int k, const int* idx, const float* hres);

class CompositeMixing {
 public:
  CompositeMixing(int num_tokens, int num_streams);  // P = I for every token

  // P_t ← M_t · P_t for every token t; `m` holds num_tokens N × N row-major matrices.
  void Apply(const std::vector<double>& m);
  MixingStats Stats() const;

  int num_tokens() const { return n_; }
  int num_streams() const { return N_; }
  const std::vector<double>& products() const { return p_; }

 private:
  int n_, N_;
  std::vector<double> p_;  // (n, N, N)
};

}  // namespace xhc::ablation

#endif  // XHC_RUNTIME_LAB_ABLATION_MIXING_GAIN_H_
