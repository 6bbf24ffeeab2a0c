#ifndef XHC_KERNELS_CPU_XHC_XHC_TYPES_H_
#define XHC_KERNELS_CPU_XHC_XHC_TYPES_H_

// Configuration, parameter, gradient and cache structs of the xHC residual sublayer
// (model-spec.md section 4) shared by the reference (ref::) and optimized paths.
//
// Layouts (row-major, PyTorch nn.Linear style [out, in]):
//   state X            (B, T, N, C)   token n = b*T + t, stream i, channel c
//   router.weight      [N, N*C]       router.bias [N]
//   pre.weight         [N, N*C]       pre.bias [N]       pre.alpha  scalar
//   res.weight         [k*k, k*C]     res.bias [k*k]     res.alpha  scalar
//   post.weight        [k*K, k*C]     post.bias [k*K]    post.alpha scalar
//   conv.j.weight      [kappa_j, C]

#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc::kernels {

// kHc (spec 4.4) runs its own kernels (hc_ops.h, hc_reference.h) behind the same entry points.
enum class ResidualType { kXhc, kMhc, kHc, kXhcFlash };

struct XhcConfig {
  ResidualType type = ResidualType::kXhc;
  int n_streams = 16;                          // N
  int n_active = 4;                            // k (ignored by mhc and hc: k = N)
  int n_fixed = 2;                             // m (ignored by mhc and hc: m = N)
  std::vector<int> conv_kernels = {4, 8, 12};  // MLP side of xhc, xhc_flash and mhc
  bool gram_schmidt = true;
  int sinkhorn_iters = 20;
  bool is_mlp = false;  // attention side (false) or MLP side (true)
  // xhc_flash (spec 4.5): sublayers per window (2 or 4) and this sublayer's position in it.
  int window = 1;
  int window_pos = 0;
};

// Limits ResolveDims enforces (k: active streams; r: temporal convolutions, K = 1 + r).
constexpr int kMaxActive = 16, kMaxConvKernels = 32;

// Sizes derived from a validated config and the model width C.
struct XhcDims {
  int N = 0, k = 0, m = 0;
  int K = 1;  // write components: 1 + r
  int r = 0;  // number of temporal convolutions actually applied
  int C = 0;
  bool has_router = false;   // router.* read here (xhc; the first sublayer of a flash window)
  bool has_mix = true;       // res.* and Sinkhorn mixing (all but a flash window's inner ones)
  bool hc = false;           // original Hyper-Connections (spec 4.4): own kernels, k = N
  bool flash = false;        // xhc_flash: routing and read maps come from the window entry
  int window = 1, pos = 0;   // flash window size and this sublayer's position
  std::vector<int> kernels;  // the r widths
  int D() const { return N * C; }                   // flattened state per token
  int Da() const { return k * C; }                  // flattened active streams per token
  int Rres() const { return has_mix ? k * k : 0; }  // res rows of the stacked maps
  int Q() const { return Rres() + k * K; }          // res rows then post rows
  int Widest() const {                              // the widest convolution (0 without any)
    int w = 0;
    for (int width : kernels) w = width > w ? width : w;
    return w;
  }
  bool entry() const { return !flash || pos == 0; }
  bool last() const { return !flash || pos == window - 1; }
};

// Validates `cfg` (naming the offending key) and derives the sizes.
absl::StatusOr<XhcDims> ResolveDims(const XhcConfig& cfg, int C);

// Parameters by spec name. router_* and conv_weight are unused (may be null / empty) for mhc
// and on the attention side respectively.
template <typename T>
struct XhcParamsT {
  const T* router_weight = nullptr;
  const T* router_bias = nullptr;
  const T* pre_weight = nullptr;
  const T* pre_bias = nullptr;
  const T* pre_alpha = nullptr;
  const T* res_weight = nullptr;
  const T* res_bias = nullptr;
  const T* res_alpha = nullptr;
  const T* post_weight = nullptr;
  const T* post_bias = nullptr;
  const T* post_alpha = nullptr;
  std::vector<const T*> conv_weight;  // conv.j.weight, j = 0 .. r-1
  // xhc_flash, window entry only: pre.weight / pre.bias / pre.alpha of every sublayer of the
  // window in order ([0] is this sublayer's own), projected from the entry state in one pass.
  std::vector<const T*> window_pre_weight, window_pre_bias, window_pre_alpha;
};

// Gradients of the same shape; every kernel ACCUMULATES (+=) so micro-batches sum up.
template <typename T>
struct XhcGradsT {
  T* router_weight = nullptr;
  T* router_bias = nullptr;
  T* pre_weight = nullptr;
  T* pre_bias = nullptr;
  T* pre_alpha = nullptr;
  T* res_weight = nullptr;
  T* res_bias = nullptr;
  T* res_alpha = nullptr;
  T* post_weight = nullptr;
  T* post_bias = nullptr;
  T* post_alpha = nullptr;
  std::vector<T*> conv_weight;
};

// xhc_flash (spec 4.5): what the w sublayers of one window share, for one micro-batch. The
// window entry's XhcPre fills the routing, the entry statistics and every sublayer's read map
// (all from the entry state X0); the later sublayers' XhcPre read them. In backward, every
// sublayer adds d loss / d p and its read map's dz (the optimized path: of the active streams,
// and its du) here, and the entry's XhcBackwardInput turns them into the gradient of X0; the
// weight passes read them afterwards.
template <typename T>
struct FlashWindowT {
  int w = 0;                           // sublayers in the window
  std::vector<int> idx;                // (n, k) the shared active set
  std::vector<T> p;                    // (n, k) slot weights
  std::vector<T> s;                    // (n, N) router probabilities
  std::vector<T> mean, rstd_ln, rstd;  // (n) LayerNorm / RMS statistics of X0
  std::vector<T> proj;                 // (n, N + w*N) raw X0 . [router; pre_0; ..; pre_w-1]^T
  std::vector<T> hpre;                 // (n, w, N) read map of each sublayer, from X0
  std::vector<T> base;                 // (n, w, C) optimized path: sum over the streams
                                       // outside the active set of hpre_q,i X0_i
  std::vector<T> dp;                   // (n, k) d loss / d p, summed over the window
  std::vector<T> dz_pre;               // (n, w, N) d loss / d read-map pre-activations
  std::vector<T> dz_router;            // (n, N) d loss / d router pre-activations
  std::vector<T> du;                   // optimized path: (n, w, C) d loss / d u_q of the later
                                       // sublayers, whose reads of the streams outside the
                                       // active set (X0's) the entry's backward differentiates
  std::vector<T> pre_alpha;            // optimized path: (w) pre.alpha of each sublayer
  std::vector<T> wgrad;                // optimized path: (N + w*N, D) the projections'
  int wgrad_taken = 0;                 // weight-gradient products, until all w took theirs
  int entry_backward_done = 0;         // set by the entry's XhcBackwardInput
};

// Everything one sublayer's backward needs besides the saved input state X_in.
// Owned by the caller, sized by the kernels (vectors are resized on XhcPre).
// Per-token sizes, n = B*T tokens.
template <typename T>
struct XhcCacheT {
  int B = 0, T_len = 0;
  XhcDims dims;
  // Written by XhcPre.
  std::vector<int> idx;    // (n, k) active stream of each slot
  std::vector<T> p;        // (n, k) slot weights (1 for fixed slots, s_idx otherwise)
  std::vector<T> s;        // (n, N) router probabilities (xhc)
  std::vector<T> hpre;     // (n, N) read map
  std::vector<T> proj;     // (n, 2N) raw projections x.Wr^T (router), x.Wp^T (pre)
  std::vector<T> mean;     // (n) LayerNorm mean of flat
  std::vector<T> rstd_ln;  // (n) 1/sqrt(var + 1e-6)
  std::vector<T> rstd;     // (n) 1/sqrt(mean(x^2) + 1e-6)
  std::vector<T> xa;       // (n, k, C) old active streams Xa
  std::vector<T> rstd_a;   // (n) rms factor of vec(Xa)
  std::vector<T> map_raw;  // (n, Q) raw projections Xa.Wres^T then Xa.Wpost^T
  std::vector<T> hres;     // (n, k, k)
  std::vector<T> hpost;    // (n, k, K)
  // Written by XhcPost.
  std::vector<T> aug;  // (n, K, C) write components; aug[0] = out
  // Written by the input-gradient backward, read by the weight-gradient backward.
  std::vector<T> dz_proj;  // (n, 2N) d loss / d router pre-activation, d / d pre pre-act.
  std::vector<T> dz_map;   // (n, Q) d loss / d res logits, d / d post pre-activation
  std::vector<T> dg;       // (n, r, C) d loss / d conv output g_j (before Gram-Schmidt)
  std::vector<T> scratch;  // implementation-private
  // hc (spec 4.4) only; xa then holds the whole old state (k = N) and aug[0] = out.
  std::vector<T> hc_rstd;  // (n, N) rms factor of each stream
  std::vector<T> hc_dots;  // (n, N, N+2) <w, rms(X_i)> for w = pre, post, res rows 0..N-1
  std::vector<T> hc_dmap;  // (n, N, N+2) d loss / d the maps those dots feed: Hpre_i,
                           // Hpost_i, Hres[a][i] (same layout), set by the backward
  // xhc_flash: the window this sublayer belongs to, shared with the window's other sublayers
  // (the entry's XhcPre creates it; the caller hands the same pointer to the later sublayers'
  // caches before their XhcPre). idx, p, s, hpre and the statistics above are this
  // sublayer's copies of the window's.
  std::shared_ptr<FlashWindowT<T>> window;
};

using XhcParams = XhcParamsT<float>;
using XhcGrads = XhcGradsT<float>;
using XhcCache = XhcCacheT<float>;

// Head reduce of spec 2.4: h = sigmoid(alpha * (rms(flat) . W^T) + b), y = sum_i h_i X_i.
template <typename T>
struct HeadParamsT {
  const T* weight = nullptr;  // head_hc.weight [N, N*C]
  const T* bias = nullptr;    // head_hc.bias [N]
  const T* alpha = nullptr;   // head_hc.alpha scalar
};
template <typename T>
struct HeadGradsT {
  T* weight = nullptr;
  T* bias = nullptr;
  T* alpha = nullptr;
};
template <typename T>
struct HeadCacheT {
  std::vector<T> rstd;  // (n)
  std::vector<T> proj;  // (n, N) raw x.W^T
  std::vector<T> h;     // (n, N)
  std::vector<T> dz;    // (n, N) stashed by the input-gradient backward
};
using HeadParams = HeadParamsT<float>;
using HeadGrads = HeadGradsT<float>;
using HeadCache = HeadCacheT<float>;

constexpr double kNormEps = 1e-6;      // rms / ln epsilon of the residual maps
constexpr double kSinkhornEps = 1e-6;  // added to row / column sums
constexpr double kGramSchmidtEps = 1e-6;

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_XHC_TYPES_H_
