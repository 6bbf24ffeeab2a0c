// Micro-benchmark of the skinny products at the bench's call-site shapes
// (docs/design/skinny-gemm-and-isa-dispatch.md), one thread: DotRows (16 tokens x 16384 against 32
// rows: XhcPre's projections; 16 x 4096 against 32: its map projections; 16 x 8192 against 80 and
// 64: xhc_flash's window entry) and AxpyRows (the BackwardInput products), per path this CPU
// supports, against OpenBLAS sgemm on 256-token blocks (the alternative of issue #12); AtXRows (the
// weight passes), and where the case has router rows, with their zeros multiplied densely against
// skipped (sparse_rows).
// "stream": the token blocks walk a 4096-token state (memory-bound like the real pass);
// "cached": the same block again and again; "packed-W": with W packed once (SkinnyWeights,
// as the fused passes call both products; unpacked calls pack W per call), streaming and,
// for DotRows, cached (the gap between them is what the X stream costs).
// Prints GFLOP/s, best of 5. `--case NAME` runs one case (proj, proj8k, maps, flash, flash64,
// pre16, tile512).
//   bazel run //kernels/cpu/xhc:skinny_gemm_bench [-- --case pre16]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/xhc/gemm_util.h"
#include "kernels/cpu/xhc/skinny_gemm.h"
#include "third_party/openblas_cblas.h"

namespace xhc::kernels::cpu {
namespace {

double Seconds(const std::function<void()>& f) {
  double best = 1e9;
  for (int it = 0; it < 5; ++it) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

struct Case {
  const char* name;
  int R, D;
  int router;  // leading rows that are the router's (AtXRows' sparse_rows), 0: none
};
// proj: xhc_bench's projections (N*C = 16384); proj8k: the same at model_bench's N*C.
// At model_bench's N*C: flash, xhc_flash window 4's entry projection (router + 4 read maps,
// DotRows and AtXRows); flash64, its input-gradient product (the read maps' rows, AxpyRows).
// pre16: xhc's input-gradient product at the bench's N*C (the 16 read-map rows; the router's
// are added per token).
// tile512: proj's rows over 512 columns, so DotRows' cached block (X 32 KiB, packed W 64 KiB)
// sits in L1 and L2: the register tile's own rate, against which proj shows what reaching X
// and W from L3 and memory costs (docs/design/skinny-gemm-and-isa-dispatch.md).
constexpr Case kCases[] = {{"proj", 32, 16384, 16},  {"proj8k", 32, 8192, 16},
                           {"maps", 32, 4096, 0},    {"flash", 80, 8192, 16},
                           {"flash64", 64, 8192, 0}, {"pre16", 16, 16384, 0},
                           {"tile512", 32, 512, 0}};

// The cases named `only` (all when empty).
void Run(const std::string& only) {
  constexpr int kTokens = 4096, kB = kMaxTokens;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
  };
  openblas_set_num_threads(1);
  for (const Case& cs : kCases) {
    if (!only.empty() && only != cs.name) continue;
    const int R = cs.R, D = cs.D;
    const auto X = random(static_cast<size_t>(kTokens) * D), W = random(static_cast<size_t>(R) * D);
    std::vector<float> out(static_cast<size_t>(kTokens) * D);  // big enough for both products
    const auto A = random(static_cast<size_t>(kTokens) * R);
    const double flops = 2.0 * kTokens * R * D;
    for (SkinnyIsa isa : {SkinnyIsa::kAvx512, SkinnyIsa::kAvx2, SkinnyIsa::kGeneric}) {
      if (!SetSkinnyIsaForTesting(isa).ok()) continue;
      const double dot_s = Seconds([&] {
        for (int t = 0; t < kTokens; t += kB) {
          DotRows(kB, R, D, X.data() + static_cast<size_t>(t) * D, D, W.data(), D,
                  out.data() + t * R, R);
        }
      });
      const double dot_c = Seconds([&] {
        for (int t = 0; t < kTokens; t += kB)
          DotRows(kB, R, D, X.data(), D, W.data(), D, out.data(), R);
      });
      const double axpy_s = Seconds([&] {
        for (int t = 0; t < kTokens; t += kB) {
          AxpyRows(kB, R, D, A.data() + t * R, R, W.data(), D,
                   out.data() + static_cast<size_t>(t) * D, D, true);
        }
      });
      const double axpy_c = Seconds([&] {
        for (int t = 0; t < kTokens; t += kB)
          AxpyRows(kB, R, D, A.data(), R, W.data(), D, out.data(), D, true);
      });
      // W packed once (SkinnyWeights), as the fused passes call them.
      const SkinnyWeights dw = PackForDotRows(R, D, W.data(), D);
      const double dot_p = Seconds([&] {
        for (int t = 0; t < kTokens; t += kB) {
          DotRows(kB, dw, X.data() + static_cast<size_t>(t) * D, D, out.data() + t * R, R);
        }
      });
      const double dot_pc = Seconds([&] {
        for (int t = 0; t < kTokens; t += kB) DotRows(kB, dw, X.data(), D, out.data(), R);
      });
      const SkinnyWeights aw = PackForAxpyRows(R, D, W.data(), D);
      const double axpy_p = Seconds([&] {
        for (int t = 0; t < kTokens; t += kB) {
          AxpyRows(kB, aw, A.data() + t * R, R, out.data() + static_cast<size_t>(t) * D, D, true);
        }
      });
      std::printf(
          "%-5s %-8s DotRows stream %6.1f cached %6.1f packed-W stream %6.1f cached "
          "%6.1f | AxpyRows stream %6.1f cached %6.1f packed-W stream %6.1f GFLOP/s\n",
          cs.name, SkinnyIsaName(isa), flops / dot_s / 1e9, flops / dot_c / 1e9,
          flops / dot_p / 1e9, flops / dot_pc / 1e9, flops / axpy_s / 1e9, flops / axpy_c / 1e9,
          flops / axpy_p / 1e9);
    }
    // Weight gradient tmp (R, D) = A^T (R, n) . X (n, D) over all tokens: AtXRows per path on
    // AtXColumns' column blocks, against OpenBLAS on 512-column blocks (DeterministicSgemm's
    // former form).
    std::vector<float> g(static_cast<size_t>(R) * D);
    for (SkinnyIsa isa : {SkinnyIsa::kAvx512, SkinnyIsa::kAvx2, SkinnyIsa::kGeneric}) {
      if (!SetSkinnyIsaForTesting(isa).ok()) continue;
      const double atx = Seconds([&] {  // one thread
        for (int c = 0; c < D; c += kAtXColumns) {
          AtXRows(kTokens, R, std::min(kAtXColumns, D - c), A.data(), R, X.data() + c, D,
                  g.data() + c, D);
        }
      });
      const double atx_c = Seconds([&] {  // the first 256 tokens, again and again
        for (int t = 0; t < kTokens; t += 256) {
          for (int c = 0; c < D; c += kAtXColumns) {
            AtXRows(256, R, std::min(kAtXColumns, D - c), A.data(), R, X.data() + c, D,
                    g.data() + c, D);
          }
        }
      });
      std::printf("%-5s %-8s AtXRows stream %6.1f cached %6.1f GFLOP/s\n", cs.name,
                  SkinnyIsaName(isa), flops / atx / 1e9, flops / atx_c / 1e9);
      if (cs.router == 0) continue;
      // The weight pass's real coefficients: of the router's rows 2 per token nonzero (the
      // routed streams'), the rest zero; dense tiles against zeros skipped (same bits).
      auto routed = A;
      for (int t = 0; t < kTokens; ++t) {
        for (int r = 0; r < cs.router; ++r) {
          if (r != t % cs.router && r != (t * 7 + 3) % cs.router) routed[t * R + r] = 0.0f;
        }
      }
      double ms[2];
      for (int sparse : {0, 1}) {
        ms[sparse] = 1e3 * Seconds([&] {
                       for (int c = 0; c < D; c += kAtXColumns) {
                         AtXRows(kTokens, R, std::min(kAtXColumns, D - c), routed.data(), R,
                                 X.data() + c, D, g.data() + c, D, sparse ? cs.router : 0);
                       }
                     });
      }
      // The other rows alone: what the router's rows add over them is their cost.
      const double rest_ms =
          1e3 * Seconds([&] {
            for (int c = 0; c < D; c += kAtXColumns) {
              AtXRows(kTokens, R - cs.router, std::min(kAtXColumns, D - c),
                      routed.data() + cs.router, R, X.data() + c, D, g.data() + c, D);
            }
          });
      std::printf(
          "%-5s %-8s AtXRows router rows dense %6.1f ms, zeros skipped %6.1f ms, "
          "without them %6.1f ms\n",
          cs.name, SkinnyIsaName(isa), ms[0], ms[1], rest_ms);
    }
    const double atx_blas = Seconds([&] {
      for (int c = 0; c < D; c += 512) {
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, R, std::min(512, D - c), kTokens, 1.0f,
                    A.data(), R, X.data() + c, D, 0.0f, g.data() + c, D);
      }
    });
    std::printf("%-5s sgemm512 A^T.X %6.1f GFLOP/s\n", cs.name, flops / atx_blas / 1e9);
    ClearSkinnyIsaForTesting();
    for (int rows : {16, 256}) {  // sgemm on `rows`-token blocks (DeterministicSgemm uses 256)
      const double dot = Seconds([&] {
        for (int t = 0; t < kTokens; t += rows) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, R, D, 1.0f,
                      X.data() + static_cast<size_t>(t) * D, D, W.data(), D, 0.0f,
                      out.data() + t * R, R);
        }
      });
      const double axpy = Seconds([&] {
        for (int t = 0; t < kTokens; t += rows) {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, D, R, 1.0f, A.data() + t * R,
                      R, W.data(), D, 1.0f, out.data() + static_cast<size_t>(t) * D, D);
        }
      });
      std::printf(
          "%-5s sgemm%-3d X.W^T  stream %6.1f               | A.W      stream %6.1f GFLOP/s\n",
          cs.name, rows, flops / dot / 1e9, flops / axpy / 1e9);
    }
  }
}

}  // namespace
}  // namespace xhc::kernels::cpu

int main(int argc, char** argv) {
  using xhc::kernels::cpu::kCases;
  std::string only;
  const auto known = [](const char* name) {
    return std::any_of(std::begin(kCases), std::end(kCases),
                       [&](const auto& c) { return std::string(c.name) == name; });
  };
  if (argc == 3 && std::string(argv[1]) == "--case" && known(argv[2])) {
    only = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: skinny_gemm_bench [--case NAME], NAME one of:");
    for (const auto& c : kCases) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, "\n");
    return 2;
  }
  xhc::kernels::cpu::Run(only);
  return 0;
}
