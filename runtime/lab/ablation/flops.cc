#include "runtime/lab/ablation/flops.h"

namespace xhc::ablation {
namespace {

// Forward FLOPs per token of one residual sublayer (spec §4), by type.
double ResidualSublayer(const ModelConfig& m, bool is_mlp, int window_pos) {
  const ResidualConfig& r = m.residual;
  const double C = m.d_model, N = r.n_streams;
  if (r.type == ResidualType::kVanilla) return C;  // X + F(X): one add per channel
  if (r.type == ResidualType::kHc) {
    // pre, post dots (N streams × C each), res dots (N rows × N streams × C), the dense read
    // (N·C), the N × N mix (N²·C) and the write (N·C).
    return 2 * N * C + 2 * N * C + 2 * N * N * C + 2 * N * C + 2 * N * N * C + 2 * N * C;
  }
  const bool mhc = r.type == ResidualType::kMhc;
  const double k = mhc ? N : r.n_active;
  const int kernels = is_mlp ? static_cast<int>(r.conv_kernels.size()) : 0;
  const double K = 1 + kernels;
  const bool flash = r.type == ResidualType::kXhcFlash;
  const bool router = r.type == ResidualType::kXhc || (flash && window_pos == 0);
  const bool mix = !flash || window_pos == r.window - 1;
  double f = 0;
  if (router) f += 2 * N * (N * C);  // router.weight [N, N·C]
  f += 2 * N * (N * C);              // pre.weight [N, N·C]
  f += 2 * N * C;                    // dense read u = Σ hpre_i X_i
  if (mix) {
    f += 2 * (k * k) * (k * C);           // res.weight [k², k·C]
    f += r.sinkhorn_iters * 2 * (k * k);  // a column and a row division pass per iteration
    f += 2 * k * k * C;                   // mix Σ_j' Hres[j][j'] Xa[j']
  }
  f += 2 * (k * K) * (k * C);  // post.weight [k·K, k·C]
  f += 2 * k * K * C;          // write Σ_r Hpost[j][r] aug[r]
  for (int kappa : is_mlp ? r.conv_kernels : std::vector<int>{}) f += 2 * kappa * C;
  if (r.gram_schmidt) f += 4 * C * kernels * (kernels + 1) / 2.0;  // ⟨g,v⟩ and g -= a·v
  return f;
}

}  // namespace

FlopCount FlopsPerToken(const ModelConfig& m) {
  const double C = m.d_model, H = m.n_heads, Hkv = m.n_kv_heads, dh = m.head_dim();
  const double T = m.seq_len, F = m.d_ff, V = m.vocab_size, N = m.residual.n_streams;
  FlopCount c;
  const double attn = 2 * C * (H + 2 * Hkv) * dh       // q, k, v projections
                      + 2 * H * dh * C                 // output projection
                      + 2 * 2 * H * dh * (T + 1) / 2;  // q·k and p·v over the causal context
  const double mlp = 2 * 3 * C * F;                    // w1, w3, w2
  c.backbone = m.n_layers * (attn + mlp) + 2 * C * V;
  for (int q = 0; q < 2 * m.n_layers; ++q) {
    const int pos = m.residual.type == ResidualType::kXhcFlash ? q % m.residual.window : 0;
    c.residual += ResidualSublayer(m, q % 2 == 1, pos);
  }
  if (N > 1) c.residual += 2 * N * (N * C) + 2 * N * C;  // head_hc.weight and Σ h_i X_i
  return c;
}

std::string FlopFormula() {
  return "Per token, forward, a multiply-add = 2 FLOPs; training = 3 × forward.\n"
         "- backbone: L·[2C(H+2Hkv)dh + 2H·dh·C + 2H·dh·(T+1) + 6C·d_ff] + 2C·V\n"
         "- xhc / mhc sublayer: router 2N·NC (xhc; xhc_flash window entry) + read map 2N·NC + "
         "dense read 2NC + res 2k²·kC + Sinkhorn 2k²·iters + mix 2k²C (not on a flash window's "
         "inner sublayers) + post 2kK·kC + write 2kKC + convolutions 2C·Σκ + Gram–Schmidt "
         "2C·r(r+1) (MLP sublayers with r kernels); mhc: k = N\n"
         "- hc sublayer: 2NC (pre) + 2NC (post) + 2N²C (res) + 2NC (read) + 2N²C (mix) + 2NC "
         "(write)\n"
         "- vanilla sublayer: C (the residual add)\n"
         "- head reduce (N > 1): 2N·NC + 2NC\n";
}

}  // namespace xhc::ablation
