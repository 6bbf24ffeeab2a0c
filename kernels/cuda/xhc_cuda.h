#ifndef XHC_KERNELS_CUDA_XHC_CUDA_H_
#define XHC_KERNELS_CUDA_XHC_CUDA_H_

// C-style launch API of the CUDA kernels. Deliberately free of Abseil, protobuf and CUDA
// headers so that (1) nvcc never has to see Abseil, (2) the standalone device check binary
// (check/) builds with nothing but the toolkit, and (3) host code compiled by g++ without a
// toolkit can still include it. Every function returns a cudaError_t value (0 = success) or
// one of the kXhcErr* codes below; cuda_status.h turns those into absl::Status. Each launch
// is followed by cudaGetLastError, so a bad launch configuration is reported at its call.
//
// Numerics (architecture.md): the residual state, sublayer inputs/outputs and gradients of
// the state are bf16 (bit patterns carried as uint16_t on the host side); maps, statistics,
// Sinkhorn, weights, weight gradients and every accumulation are float32.

#include <cstddef>
#include <cstdint>

// Shape accessors are callable from kernels too (nvcc sees __host__ __device__).
#ifdef __CUDACC__
#define XHC_HD __host__ __device__
#else
#define XHC_HD
#endif

namespace xhc::cuda {

using bf16_t = uint16_t;

// Error codes outside the cudaError_t range (cudaError_t values are < 10000).
constexpr int kXhcErrInvalidArgument = 100001;  // shape outside what the kernels support
constexpr int kXhcErrCublasBase = 200000;       // + cublasStatus_t
constexpr int kXhcErrNoCuda = 300001;           // built without the toolkit

// Limits of the fused kernels (checked by XhcCheckShape).
constexpr int kMaxStreams = 32;  // N
constexpr int kMaxActive = 8;    // k
constexpr int kMaxK = 4;         // write components (1 + number of convolutions)
constexpr int kMaxTap = 16;      // widest convolution kernel (taps held in registers)
constexpr int kConvChunk = 64;   // tokens one thread walks in the convolution backward

// ---- device / memory helpers (cuda_util.cu) -------------------------------------------
// count = 0 and returns 0 when no driver is installed or it sees no GPU; a driver that is
// installed and fails returns its error.
int DeviceCount(int* count);
const char* ErrorString(int err);
int Malloc(void** ptr, size_t bytes);
int Free(void* ptr);
int MemcpyH2D(void* dst, const void* src, size_t bytes);
int MemcpyD2H(void* dst, const void* src, size_t bytes);
int MemcpyD2D(void* dst, const void* src, size_t bytes, void* stream);
int Memset(void* dst, int byte, size_t bytes);
int Synchronize();
int CublasCreate(void** handle);
int CublasDestroy(void* handle);
// Host-side bf16 conversion (round to nearest even), for tests and checks.
bf16_t FloatToBf16(float f);
float Bf16ToFloat(bf16_t b);
// Events for timing (check/ and benchmarks).
int EventCreate(void** ev);
int EventRecord(void* ev, void* stream);
int EventElapsedMs(void* start, void* stop, float* ms);
int EventDestroy(void* ev);
// Fills n elements (bf16 when `bf16`, else float32) with values uniform in [lo, hi) from a
// counter hash of (seed, index): benchmarks time real-looking data, never zeros.
int FillUniform(void* dst, long n, bool bf16, float lo, float hi, uint64_t seed, void* stream);

// ---- xHC sublayer (xhc_forward.cu, xhc_backward_{out,input,weights}.cu) ---------------
struct XhcShape {
  int B = 0, T = 0;  // sequences, tokens per sequence
  int N = 16, k = 4, m = 2, C = 0;
  int K = 1;  // write components: 1 + r
  int r = 0;  // convolutions (MLP side of xhc)
  int kernels[kMaxK - 1] = {0, 0, 0};
  bool has_router = true;  // false for mhc
  bool gram_schmidt = true;
  int sinkhorn_iters = 20;
  XHC_HD long tokens() const { return static_cast<long>(B) * T; }
  XHC_HD int D() const { return N * C; }
  XHC_HD int Da() const { return k * C; }
  XHC_HD int Q() const { return k * k + k * K; }
};
int XhcCheckShape(const XhcShape& s);

// Parameters (device, float32), spec names. router_* null for mhc.
struct XhcDevParams {
  const float* router_weight = nullptr;  // [N, N*C]
  const float* router_bias = nullptr;    // [N]
  const float* pre_weight = nullptr;     // [N, N*C]
  const float* pre_bias = nullptr;
  const float* pre_alpha = nullptr;   // scalar (device)
  const float* res_weight = nullptr;  // [k*k, k*C]
  const float* res_bias = nullptr;
  const float* res_alpha = nullptr;
  const float* post_weight = nullptr;  // [k*K, k*C]
  const float* post_bias = nullptr;
  const float* post_alpha = nullptr;
  const float* conv_weight[kMaxK - 1] = {nullptr, nullptr, nullptr};  // [kappa_j, C]
};
// Gradients, same shapes, ACCUMULATED (+=).
struct XhcDevGrads {
  float* router_weight = nullptr;
  float* router_bias = nullptr;
  float* pre_weight = nullptr;
  float* pre_bias = nullptr;
  float* pre_alpha = nullptr;
  float* res_weight = nullptr;
  float* res_bias = nullptr;
  float* res_alpha = nullptr;
  float* post_weight = nullptr;
  float* post_bias = nullptr;
  float* post_alpha = nullptr;
  float* conv_weight[kMaxK - 1] = {nullptr, nullptr, nullptr};
};

// Per-micro-batch device cache; one allocation carved by XhcCacheCarve. n = B*T tokens.
struct XhcDevCache {
  int* idx = nullptr;          // (n, k)
  float* p = nullptr;          // (n, k)
  float* s = nullptr;          // (n, N) router probabilities
  float* hpre = nullptr;       // (n, N)
  float* proj = nullptr;       // (n, 2N) raw x.Wr^T, x.Wp^T
  float* stats = nullptr;      // (n, 4): mean, rstd_ln, rstd, rstd_a
  float* map_raw = nullptr;    // (n, Q) raw xa.Wres^T, xa.Wpost^T
  float* hres = nullptr;       // (n, k, k)
  float* hpost = nullptr;      // (n, k, K)
  float* wsum = nullptr;       // (N) router weight row sums (LayerNorm correction)
  bf16_t* aug = nullptr;       // (n, r, C) v_1..v_r after Gram-Schmidt (v_0 = out)
  float* gs = nullptr;         // (n, r*r + r): coefficients <g,v_i>/(|v_i|^2+eps), |v_i|^2+eps
  float* dz_proj = nullptr;    // (n, 2N)
  float* dz_map = nullptr;     // (n, Q)
  float* corr = nullptr;       // (n, 4) backward normalisation corrections
  float* dg = nullptr;         // (n, r, C) the conv outputs before Gram-Schmidt (forward
                               // scratch), then d loss / d conv outputs (backward)
  float* dout_f = nullptr;     // (n, C) direct part of d_out before the conv input-gradient
  bf16_t* xa = nullptr;        // (n, k, C) active streams of X_in, gathered by XhcPreLaunch
                               // for its res / post GEMM and read again by the weight gradient
  bf16_t* coef = nullptr;      // (n, max(2N, Q)) GEMM coefficients (weight gradients)
  bf16_t* wsplit = nullptr;    // (max(6N N C, 2 Q k C)) bf16 hi / lo rows of the map weights
                               // (the forward: hi, lo; the input gradient: hi, lo, hi)
  float* gemm_out = nullptr;   // (n, max(4N, 2Q)) the forward projections' GEMM output; the
                               // input gradient's (n, 6N) bf16 GEMM coefficients
  float* conv_part = nullptr;  // (B ceil(T / 64), sum kappa_j, C) per-chunk conv weight grads
};
size_t XhcCacheBytes(const XhcShape& s);
int XhcCacheCarve(const XhcShape& s, void* base, XhcDevCache* cache);

// Forward, first half: maps, selection, dense read u (n, C), and the active-stream mixing
// Hres . Xa written IN PLACE into the active streams of X (the paper's fused read + mix).
// Callers keep a copy of X as it was before this call (X_in) for the backward. The two map
// projections run on cuBLAS (`cublas`, a cublasHandle_t); cache->xa receives the active
// streams of X_in.
int XhcPreLaunch(const XhcShape& s, const XhcDevParams& P, bf16_t* X, bf16_t* u, XhcDevCache* cache,
                 void* cublas, void* stream);
// Forward, second half: temporal augmentation (MLP side) and X[idx_j] += p_j Hpost_j . aug.
int XhcPostLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* out, bf16_t* X,
                  XhcDevCache* cache, void* stream);
// Input gradient, first half: d_out (n, C) from dX_new. out is the sublayer output.
int XhcBackwardOutLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                         const bf16_t* out, const bf16_t* dX_new, XhcDevCache* cache, bf16_t* d_out,
                         void* stream);
// Input gradient, second half: dX (in dX_new, out d loss / d X_in) given du (n, C). For
// k <= 4 the read / router map term runs on cuBLAS (`cublas`, a cublasHandle_t).
int XhcBackwardInputLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                           const bf16_t* du, bf16_t* dX, XhcDevCache* cache, void* cublas,
                           void* stream);
// Weight gradients (cuBLAS for the two big projections), accumulated into G. Reads
// cache->xa as XhcPreLaunch left it.
int XhcBackwardWeightsLaunch(const XhcShape& s, const XhcDevParams& P, const bf16_t* X_in,
                             const bf16_t* out, XhcDevCache* cache, const XhcDevGrads& G,
                             void* cublas, void* stream);

// ---- transformer ops (nn_ops.cu, attention.cu) ----------------------------------------
// y (M,N) = x (M,K) . W^T with W (N,K); bf16 inputs, float32 accumulation; y bf16 or f32.
int GemmForward(void* cublas, const bf16_t* x, const bf16_t* w, void* y, bool y_f32, int M, int K,
                int N, void* stream);
// dx (M,K) = dy (M,N) . W (bf16 out); dw (N,K) f32 += dy^T . x.
int GemmBackwardInput(void* cublas, const bf16_t* dy, const bf16_t* w, bf16_t* dx, int M, int K,
                      int N, void* stream);
int GemmBackwardWeight(void* cublas, const bf16_t* dy, const bf16_t* x, float* dw, int M, int K,
                       int N, void* stream);
int F32ToBf16(const float* x, bf16_t* y, long n, void* stream);
int Bf16ToF32(const bf16_t* x, float* y, long n, void* stream);
// RMSNorm over rows of x (R,C): y = x * rstd * w.
int RmsNormForward(const bf16_t* x, const float* w, bf16_t* y, float* rstd, int R, int C, float eps,
                   void* stream);
// dx overwritten; dw += (deterministic column sums).
int RmsNormBackward(const bf16_t* dy, const bf16_t* x, const float* w, const float* rstd,
                    bf16_t* dx, float* dw, int R, int C, void* stream);
// RoPE on (B,T,H,dh) in place; sign +1 forward, -1 backward.
int Rope(bf16_t* x, int B, int T, int H, int dh, float theta, int sign, void* stream);
int SwigluForward(const bf16_t* a, const bf16_t* b, bf16_t* h, long n, void* stream);
int SwigluBackward(const bf16_t* dh, const bf16_t* a, const bf16_t* b, bf16_t* da, bf16_t* db,
                   long n, void* stream);
// logits (R,V) f32; loss_rows (R) per-row loss; lse (R).
int CrossEntropyForward(const float* logits, const int32_t* targets, float* lse, float* loss_rows,
                        int R, int V, void* stream);
int CrossEntropyBackward(const float* logits, const float* lse, const int32_t* targets,
                         float* dlogits, int R, int V, float scale, void* stream);
// AdamW on float32 master weights; optionally refreshes a bf16 copy (p_bf16 may be null).
int AdamWStep(float* p, const float* g, float* m, float* v, bf16_t* p_bf16, long n, long step,
              float lr, float beta1, float beta2, float eps, float wd, bool decay, float grad_scale,
              void* stream);
// Causal GQA attention. q (B,T,H,dh), k/v (B,T,Hkv,dh), out (B,T,H,dh), lse (B,H,T) f32.
int AttentionForward(const bf16_t* q, const bf16_t* k, const bf16_t* v, bf16_t* out, float* lse,
                     int B, int T, int H, int Hkv, int dh, void* stream);
int AttentionBackward(const bf16_t* dout, const bf16_t* q, const bf16_t* k, const bf16_t* v,
                      const bf16_t* out, const float* lse, bf16_t* dq, bf16_t* dk, bf16_t* dv,
                      float* scratch_d, int B, int T, int H, int Hkv, int dh, void* stream);

}  // namespace xhc::cuda

#endif  // XHC_KERNELS_CUDA_XHC_CUDA_H_
