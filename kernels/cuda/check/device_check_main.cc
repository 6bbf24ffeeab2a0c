// Standalone device check (built by device_check.sh with nvcc + g++, no Abseil, no Bazel):
//   1. every CUDA op, forward and backward, against the CPU reference (checks.h);
//   2. the card's ceilings: device-to-device copy bandwidth, cuBLAS bf16 GEMM TFLOP/s;
//   3. one table: each fused xHC launch's modelled bandwidth vs the copy ceiling, and the
//      MLP sublayer fwd+bwd with xHC vs with a plain residual at C=2048, 16K tokens, N=16, k=4.
// Exit status: 0 when every check passed or there is no device (says so), 1 otherwise.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/check/checks.h"
#include "kernels/cuda/xhc_cuda.h"

using namespace xhc::cuda;  // NOLINT: a main file

namespace {

int g_err = 0;
int g_reps = 5;  // --reps N: timed runs per xHC launch (1 under a profiler)
#define TRY(expr)                                                                             \
  do {                                                                                        \
    if (g_err == 0) {                                                                         \
      g_err = (expr);                                                                         \
      if (g_err) std::printf("CUDA error %d (%s) at %s\n", g_err, ErrorString(g_err), #expr); \
    }                                                                                         \
  } while (0)

void* Alloc(size_t bytes) {
  void* p = nullptr;
  TRY(Malloc(&p, bytes));
  if (p) TRY(Memset(p, 0, bytes));
  return p;
}

// Fills a device buffer with uniform values (timing on zeros would flatter the kernels and
// hide unwritten outputs). Each call draws a fresh seed. Takes const pointers because the
// kernels' parameter structs hold const ones; every buffer filled here is owned by Bench.
void Rand(const void* p, long n, bool bf16, float lo, float hi) {
  static uint64_t seed = 0x5eed;
  TRY(FillUniform(const_cast<void*>(p), n, bf16, lo, hi, ++seed, nullptr));
}

// Median-free mean of `reps` timed runs after one warm-up, in ms.
double TimeMs(const std::function<void()>& f, int reps) {
  void *a = nullptr, *b = nullptr;
  TRY(EventCreate(&a));
  TRY(EventCreate(&b));
  f();
  TRY(Synchronize());
  TRY(EventRecord(a, nullptr));
  for (int i = 0; i < reps; ++i) f();
  TRY(EventRecord(b, nullptr));
  float ms = 0;
  TRY(EventElapsedMs(a, b, &ms));
  EventDestroy(a);
  EventDestroy(b);
  return ms / reps;
}

int RunCorrectness() {
  int failed = 0, total = 0;
  std::vector<check::XhcCase> cases;
  auto add = [&](int B, int T, int N, int k, int m, int C, bool mlp, bool mhc, bool gs) {
    check::XhcCase c;
    c.B = B, c.T = T, c.N = N, c.k = k, c.m = m, c.C = C, c.mlp = mlp, c.mhc = mhc;
    c.gram_schmidt = gs;
    cases.push_back(c);
  };
  add(2, 8, 16, 4, 2, 64, false, false, true);
  add(1, 13, 16, 4, 2, 77, false, false, true);
  add(2, 16, 16, 4, 2, 64, true, false, true);
  add(3, 7, 8, 4, 1, 100, true, false, true);
  add(1, 20, 16, 4, 2, 48, true, false, false);
  add(2, 9, 4, 4, 4, 72, false, true, true);
  add(1, 17, 32, 8, 2, 264, false, false, true);
  add(2, 64, 16, 4, 2, 512, true, false, true);
  add(2, 150, 16, 4, 2, 40, true, false, true);   // 3 conv chunks per sequence, token tails
  add(1, 10, 32, 4, 2, 24, false, false, true);   // N > 16 with k <= 4: the wide dense tiles
  add(1, 12, 16, 4, 2, 2048, true, false, true);  // 8 channels per thread in registers
  add(1, 10, 16, 4, 2, 1032, true, false, true);  // the same, with a channel tail
  add(1, 6, 16, 4, 2, 2056, true, false, true);   // past the registers: shared memory
  std::vector<check::Result> all;
  for (const auto& c : cases) {
    for (auto& r : check::CheckXhc(c, 1)) all.push_back(r);
  }
  for (auto& r : check::CheckNn(3)) all.push_back(r);
  for (const auto& r : all) {
    ++total;
    if (!r.ok()) ++failed;
    std::printf("%-4s %-58s rel_err %.2e (tol %.0e) worst elem %.2f nan %ld %s\n",
                r.ok() ? "ok" : "FAIL", r.name.c_str(), r.rel_err, r.tol, r.worst_element,
                r.nan_count, r.note.c_str());
  }
  std::printf("correctness: %d of %d checks passed\n", total - failed, total);
  return failed;
}

struct Row {
  std::string name;
  double ms, bytes;
};

void Bench() {
  // Ceilings.
  const size_t copy_bytes = size_t(1) << 30;
  void* a = Alloc(copy_bytes);
  void* b = Alloc(copy_bytes);
  const double copy_ms = TimeMs([&] { TRY(MemcpyD2D(b, a, copy_bytes, nullptr)); }, 10);
  const double copy_gbs = 2.0 * copy_bytes / (copy_ms * 1e6);  // read + write
  Free(a), Free(b);
  void* blas = nullptr;
  TRY(CublasCreate(&blas));
  const int G = 8192;
  auto* gx = static_cast<bf16_t*>(Alloc(size_t(G) * G * 2));
  auto* gw = static_cast<bf16_t*>(Alloc(size_t(G) * G * 2));
  auto* gy = static_cast<bf16_t*>(Alloc(size_t(G) * G * 2));
  Rand(gx, long(G) * G, true, -1, 1);
  Rand(gw, long(G) * G, true, -1, 1);
  const double gemm_ms =
      TimeMs([&] { TRY(GemmForward(blas, gx, gw, gy, false, G, G, G, nullptr)); }, 10);
  const double tflops = 2.0 * G * G * double(G) / (gemm_ms * 1e9);
  Free(gx), Free(gw), Free(gy);
  std::printf(
      "\nceilings: device-to-device copy %.0f GB/s (read+write), cuBLAS bf16 GEMM %d^3 %.0f "
      "TFLOP/s\n",
      copy_gbs, G, tflops);

  // xHC at the shape: C=2048, 16K tokens (B=8 x T=2048), N=16, k=4, MLP side K=4.
  XhcShape s;
  s.B = 8, s.T = 2048, s.N = 16, s.k = 4, s.m = 2, s.C = 2048, s.r = 3, s.K = 4;
  s.kernels[0] = 4, s.kernels[1] = 8, s.kernels[2] = 12;
  const double n = double(s.tokens()), N = s.N, k = s.k, C = s.C, r = s.r, D = s.D();
  std::vector<void*> owned;
  auto A = [&](size_t bytes) {
    owned.push_back(Alloc(bytes));
    return owned.back();
  };
  XhcDevParams P;
  XhcDevGrads Gd;
  P.router_weight = static_cast<float*>(A(N * D * 4));
  P.router_bias = static_cast<float*>(A(N * 4));
  P.pre_weight = static_cast<float*>(A(N * D * 4));
  P.pre_bias = static_cast<float*>(A(N * 4));
  P.pre_alpha = P.res_alpha = P.post_alpha = static_cast<float*>(A(4));
  P.res_weight = static_cast<float*>(A(k * k * k * C * 4));
  P.res_bias = static_cast<float*>(A(k * k * 4));
  P.post_weight = static_cast<float*>(A(k * s.K * k * C * 4));
  P.post_bias = static_cast<float*>(A(k * s.K * 4));
  for (int j = 0; j < s.r; ++j) P.conv_weight[j] = static_cast<float*>(A(s.kernels[j] * C * 4));
  Gd.router_weight = static_cast<float*>(A(N * D * 4));
  Gd.router_bias = static_cast<float*>(A(N * 4));
  Gd.pre_weight = static_cast<float*>(A(N * D * 4));
  Gd.pre_bias = static_cast<float*>(A(N * 4));
  Gd.pre_alpha = Gd.res_alpha = Gd.post_alpha = static_cast<float*>(A(16));
  Gd.res_weight = static_cast<float*>(A(k * k * k * C * 4));
  Gd.res_bias = static_cast<float*>(A(k * k * 4));
  Gd.post_weight = static_cast<float*>(A(k * s.K * k * C * 4));
  Gd.post_bias = static_cast<float*>(A(k * s.K * 4));
  for (int j = 0; j < s.r; ++j) Gd.conv_weight[j] = static_cast<float*>(A(s.kernels[j] * C * 4));
  auto* X = static_cast<bf16_t*>(A(n * D * 2));
  auto* Xin = static_cast<bf16_t*>(A(n * D * 2));
  auto* dX = static_cast<bf16_t*>(A(n * D * 2));
  auto* dXnew = static_cast<bf16_t*>(A(n * D * 2));
  auto* u = static_cast<bf16_t*>(A(n * C * 2));
  auto* out = static_cast<bf16_t*>(A(n * C * 2));
  auto* dout = static_cast<bf16_t*>(A(n * C * 2));
  // Parameters at the scales of the tests' MakeParams (maps far from constant), state and
  // gradients of order 1.
  const float wD = 1.0f / std::sqrt(float(D)), wA = 1.0f / std::sqrt(float(k * C));
  Rand(P.router_weight, long(N * D), false, -wD, wD);
  Rand(P.router_bias, long(N), false, -1, 1);
  Rand(P.pre_weight, long(N * D), false, -wD, wD);
  Rand(P.pre_bias, long(N), false, -1, 1);
  Rand(P.pre_alpha, 1, false, 0.6f, 0.8f);
  Rand(P.res_weight, long(k * k * k * C), false, -wA, wA);
  Rand(P.res_bias, long(k * k), false, -1, 1);
  Rand(P.post_weight, long(k * s.K * k * C), false, -wA, wA);
  Rand(P.post_bias, long(k * s.K), false, -1, 1);
  for (int j = 0; j < s.r; ++j) Rand(P.conv_weight[j], long(s.kernels[j] * C), false, -0.3f, 0.3f);
  for (bf16_t* t : {X, Xin, dX, dXnew}) Rand(t, long(n * D), true, -1, 1);
  for (bf16_t* t : {u, out, dout}) Rand(t, long(n * C), true, -1, 1);
  XhcDevCache cache;
  TRY(XhcCacheCarve(s, A(XhcCacheBytes(s)), &cache));
  if (g_err) return;
  XhcShape s1 = s;  // attention side: K = 1
  s1.r = 0, s1.K = 1;
  const int reps = g_reps;
  // Modelled bytes: the minimum traffic of each launch's algorithm (bf16 state = 2 B).
  std::vector<Row> rows;
  rows.push_back({"pre (maps+select+gather+Sinkhorn+read+mix)",
                  TimeMs([&] { TRY(XhcPreLaunch(s, P, X, u, &cache, blas, nullptr)); }, reps),
                  n * 2 * (2 * N * C + k * C + C + k * C)});
  rows.push_back({"post K=1 (attention)",
                  TimeMs([&] { TRY(XhcPostLaunch(s1, P, out, X, &cache, nullptr)); }, reps),
                  n * 2 * (C + 2 * k * C)});
  rows.push_back({"post K=4 (conv+GS, post-map+scatter)",
                  TimeMs([&] { TRY(XhcPostLaunch(s, P, out, X, &cache, nullptr)); }, reps),
                  n * 2 * (2 * C + 2 * r * C + 2 * k * C)});
  rows.push_back(
      {"backward out K=4 (I.1)",
       TimeMs([&] { TRY(XhcBackwardOutLaunch(s, P, Xin, out, dXnew, &cache, dout, nullptr)); },
              reps),
       n * (2 * (2 * k * C + C + r * C + C) + 4 * 2 * (C + r * C))});
  rows.push_back(
      {"backward input (I.2)",
       TimeMs([&] { TRY(XhcBackwardInputLaunch(s, P, Xin, u, dX, &cache, blas, nullptr)); }, reps),
       n * 2 * (3 * N * C + 2 * C)});
  rows.push_back(
      {"backward weights (W)",
       TimeMs([&] { TRY(XhcBackwardWeightsLaunch(s, P, Xin, out, &cache, Gd, blas, nullptr)); },
              reps),
       n * 2 * (N * C + 2 * k * C + r * C) + n * 4 * r * C});
  std::printf("\n%-46s %9s %10s %9s %8s\n", "xHC launch (C=2048, n=16384, N=16, k=4)", "ms",
              "GB moved", "GB/s", "vs copy");
  double xhc_ms = 0;
  for (const Row& row : rows) {
    const double gbs = row.bytes / (row.ms * 1e6);
    if (row.name.rfind("post K=1", 0) != 0) xhc_ms += row.ms;
    std::printf("%-46s %9.3f %10.2f %9.0f %7.0f%% %s\n", row.name.c_str(), row.ms, row.bytes / 1e9,
                gbs, 100 * gbs / copy_gbs, gbs / copy_gbs >= 0.7 ? "" : "(< 70% target)");
  }
  // The MLP sublayer F (d_ff = 4C): RMSNorm, w1/w3, SwiGLU, w2, and their backward.
  const int M = static_cast<int>(n), Cc = s.C, F = 4 * s.C;
  auto* w1 = static_cast<bf16_t*>(A(size_t(F) * Cc * 2));
  auto* w2 = static_cast<bf16_t*>(A(size_t(F) * Cc * 2));
  auto* w3 = static_cast<bf16_t*>(A(size_t(F) * Cc * 2));
  auto* gw1 = static_cast<float*>(A(size_t(F) * Cc * 4));
  auto* nw = static_cast<float*>(A(Cc * 4));
  auto* gnw = static_cast<float*>(A(Cc * 4));
  auto* rstd = static_cast<float*>(A(M * 4));
  auto* an = static_cast<bf16_t*>(A(size_t(M) * Cc * 2));
  auto* h1 = static_cast<bf16_t*>(A(size_t(M) * F * 2));
  auto* h3 = static_cast<bf16_t*>(A(size_t(M) * F * 2));
  auto* hh = static_cast<bf16_t*>(A(size_t(M) * F * 2));
  auto* d1 = static_cast<bf16_t*>(A(size_t(M) * F * 2));
  auto* d3 = static_cast<bf16_t*>(A(size_t(M) * F * 2));
  auto* da = static_cast<bf16_t*>(A(size_t(M) * Cc * 2));
  const float wC = 1.0f / std::sqrt(float(Cc)), wF = 1.0f / std::sqrt(float(F));
  Rand(w1, long(F) * Cc, true, -wC, wC);
  Rand(w3, long(F) * Cc, true, -wC, wC);
  Rand(w2, long(F) * Cc, true, -wF, wF);
  Rand(nw, Cc, false, 0.9f, 1.1f);
  if (g_err) return;
  auto mlp = [&](const bf16_t* in, bf16_t* o, const bf16_t* dO, bf16_t* dIn) {
    TRY(RmsNormForward(in, nw, an, rstd, M, Cc, 1e-6f, nullptr));
    TRY(GemmForward(blas, an, w1, h1, false, M, Cc, F, nullptr));
    TRY(GemmForward(blas, an, w3, h3, false, M, Cc, F, nullptr));
    TRY(SwigluForward(h1, h3, hh, long(M) * F, nullptr));
    TRY(GemmForward(blas, hh, w2, o, false, M, F, Cc, nullptr));
    TRY(GemmBackwardWeight(blas, dO, hh, gw1, M, F, Cc, nullptr));
    TRY(GemmBackwardInput(blas, dO, w2, hh, M, F, Cc, nullptr));
    TRY(SwigluBackward(hh, h1, h3, d1, d3, long(M) * F, nullptr));
    TRY(GemmBackwardWeight(blas, d1, an, gw1, M, Cc, F, nullptr));
    TRY(GemmBackwardWeight(blas, d3, an, gw1, M, Cc, F, nullptr));
    TRY(GemmBackwardInput(blas, d1, w1, da, M, Cc, F, nullptr));
    TRY(GemmBackwardInput(blas, d3, w3, da, M, Cc, F, nullptr));  // (sum elided: timing only)
    TRY(RmsNormBackward(da, in, nw, rstd, dIn, gnw, M, Cc, nullptr));
  };
  // Plain residual: X (n,C) += F(X); backward passes dX through and adds dF. The two adds
  // are modelled by copies of the same size (one (n,C) read+write each way).
  const double plain_ms = TimeMs(
      [&] {
        mlp(u, out, dout, da);
        TRY(MemcpyD2D(X, out, size_t(M) * Cc * 2, nullptr));
        TRY(MemcpyD2D(dX, da, size_t(M) * Cc * 2, nullptr));
      },
      std::min(3, g_reps));
  const double f_ms = TimeMs([&] { mlp(u, out, dout, da); }, std::min(3, g_reps));
  const double xhc_total = f_ms + xhc_ms;
  std::printf(
      "\nMLP sublayer fwd+bwd (C=2048, d_ff=8192, 16K tokens): plain residual %.3f ms, "
      "xHC (N=16, k=4, K=4) %.3f ms = F %.3f + xHC %.3f: ratio %.3fx (target <= 1.15x)\n",
      plain_ms, xhc_total, f_ms, xhc_ms, xhc_total / plain_ms);
  std::printf("training step tokens/s and MFU: not measured (no GPU model runtime yet)\n");
  for (void* p : owned) Free(p);
  CublasDestroy(blas);
}

}  // namespace

int main(int argc, char** argv) {
  bool bench = true, correctness = true;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-bench") == 0) {
      bench = false;
    } else if (std::strcmp(argv[i], "--no-correctness") == 0) {
      correctness = false;  // a second timing run, to see the spread between runs
    } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      g_reps = std::atoi(argv[++i]);
    } else {
      std::printf("unknown argument %s (use --no-bench, --no-correctness, --reps N)\n", argv[i]);
      return 2;
    }
  }
  int count = 0;
  const int e = DeviceCount(&count);
  if (e != 0) {  // an installed driver that fails: the machine is broken, say how
    std::printf("CUDA driver error: %s (%d); nothing was proved\n", ErrorString(e), e);
    return 1;
  }
  if (count == 0) {
    std::printf("no CUDA device (no driver, or it sees no GPU): nothing was proved\n");
    return 3;
  }
  const int failed = correctness ? RunCorrectness() : 0;
  if (bench) Bench();
  if (g_err) std::printf("benchmark aborted by CUDA error %d (%s)\n", g_err, ErrorString(g_err));
  return failed == 0 && g_err == 0 ? 0 : 1;
}
