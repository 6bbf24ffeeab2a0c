// Benchmark of one attention-side and one MLP-side xHC sublayer's residual work (F = copy):
// n = 4096 tokens (B = 4, T = 1024), C = 1024, N = 16, k = 4, m = 2, kernels {4, 8, 12}, or
// with `--shape model` model_bench's sublayer (n = 1024 tokens, C = 512). The step runs as a
// stage does: the forward in place on one state, each sublayer's input rebuilt for its
// backward (inside bwd_input, and again for the weight pass: phase `restore`); the fused
// times are the residual work alone (F's copy apart).
// Prints one JSON object (--json) with the fused and reference times, the bytes and flops of
// the fused forward+backward, memcpy bandwidth, OpenBLAS sgemm rate (each the best of a probe
// beside every timed step) and the roofline fraction.
// Also: blas_coretype (the bench re-execs with OPENBLAS_CORETYPE, see main), the machine
// (cpu_model from /proc/cpuinfo, cpu_isas: the skinny GEMM paths it supports, skinny_isa: the
// one that ran, XHC_CPU_ISA forces it; kernels/cpu/xhc/skinny_gemm_isa.h), wall and CPU time
// per fused phase (phase_ms, phase_cpu_ms), --no_reference for quick runs, --rounds R (best
// of R timed steps, default 5; more for a profile), --residual V (the variant table, at the
// --shape and --rounds given; xhc_bench_variants.h); anything else stops it with the usage
// (xhc_bench_args_test). How to compare versions on a noisy shared machine:
// docs/design/measuring.md; what the kernels' design rests on: docs/design/.

#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/cpu_info.h"
#include "base/process_env.h"
#include "kernels/cpu/xhc/skinny_gemm_isa.h"
#include "kernels/cpu/xhc/state_restore.h"
#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_reference.h"
#include "kernels/xhc_bench_variants.h"
#include "third_party/openblas_cblas.h"

namespace xhc::kernels {
namespace {

constexpr int kN = 16, kK = 4, kM = 2;
// The shape: 4 x 1024 tokens at C = 1024 (the committed bench shape), or with `--shape model`
// model_bench's default sublayer, 4 x 256 tokens at d_model 512 (set once in main).
int g_B = 4, g_T = 1024, g_C = 1024;
int g_rounds = 5;  // --rounds R: best of R timed steps (more for a steady-state profile)
size_t Tokens() { return static_cast<size_t>(g_B) * g_T; }

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Sublayer {
  XhcConfig cfg;
  XhcDims d;
  std::vector<std::vector<float>> store;  // parameters, then gradients
  XhcParams P;
  XhcGrads G;
  XhcCache cache;

  float* Add(size_t n, float scale, float offset, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    store.emplace_back(n);
    for (auto& v : store.back()) v = offset + scale * nd(rng);
    return store.back().data();
  }
  Sublayer(bool mlp, std::mt19937& rng) {
    cfg.n_streams = kN, cfg.n_active = kK, cfg.n_fixed = kM, cfg.is_mlp = mlp;
    d = ResolveDims(cfg, g_C).value();
    store.reserve(64);
    const size_t D = d.D(), Da = d.Da();
    P.router_weight = Add(kN * D, 0.02f, 0, rng), P.router_bias = Add(kN, 0.1f, 0, rng);
    P.pre_weight = Add(kN * D, 0.02f, 0, rng), P.pre_bias = Add(kN, 0.1f, 0, rng);
    P.pre_alpha = Add(1, 0, 0.01f, rng);
    P.res_weight = Add(d.k * d.k * Da, 0.02f, 0, rng), P.res_bias = Add(d.k * d.k, 0.25f, 0, rng);
    P.res_alpha = Add(1, 0, 0.01f, rng);
    P.post_weight = Add(d.k * d.K * Da, 0.02f, 0, rng), P.post_bias = Add(d.k * d.K, 0.1f, 0, rng);
    P.post_alpha = Add(1, 0, 0.01f, rng);
    for (int j = 0; j < d.r; ++j) P.conv_weight.push_back(Add(d.kernels[j] * g_C, 0.1f, 0, rng));
    G.router_weight = Add(kN * D, 0, 0, rng), G.router_bias = Add(kN, 0, 0, rng);
    G.pre_weight = Add(kN * D, 0, 0, rng), G.pre_bias = Add(kN, 0, 0, rng);
    G.pre_alpha = Add(1, 0, 0, rng);
    G.res_weight = Add(d.k * d.k * Da, 0, 0, rng), G.res_bias = Add(d.k * d.k, 0, 0, rng);
    G.res_alpha = Add(1, 0, 0, rng);
    G.post_weight = Add(d.k * d.K * Da, 0, 0, rng), G.post_bias = Add(d.k * d.K, 0, 0, rng);
    G.post_alpha = Add(1, 0, 0, rng);
    for (int j = 0; j < d.r; ++j) G.conv_weight.push_back(Add(d.kernels[j] * g_C, 0, 0, rng));
  }

  // Bytes the fused path moves for fwd+bwd, pass by pass (reads + writes, float32).
  double Bytes() const {
    const double NC = d.D(), C = g_C, kC_ = d.Da(), K = d.K, r = d.r;
    // XhcPre reads each 16-token block of X once (projections, stats, read, gather run on
    // the cached block; the map projections read the just-gathered xa from cache); writes u, xa.
    const double fwd =
        NC + C + kC_ + C + K * C + 2 * kC_;  // Post: out, aug, xa read, k streams written
    const double bwd_out = 2 * kC_ + K * C + C + 2 * r * C;  // dA, xa, aug, d_out, dg
    // XhcBackwardInput: one pass per 16-token block: X_in, dX read + write, du, xa (the map
    // and projection products are added while the block is cached).
    const double bwd_in = 3 * NC + C + kC_ + kC_;  // + the restored rows written
    const double wgt = NC + kC_ + r * C + C;       // sgemms read X_in, xa; conv reads dg, out
    const double restore = 2 * kC_;  // the weight pass's RestoreInput: xa read, k rows written
    return (fwd + bwd_out + bwd_in + wgt + restore) * 4.0 * Tokens();
  }
  // Flops: the three projection sgemms of each kind plus the O(N C) vector work, counted dense:
  // both backward products of the router's rows run only over the routed streams' rows
  // (k - m of N per token: TokenAddSparseRows, AtXRows' sparse_rows), so the fused path does
  // fewer than this (the roofline's bound, the larger of the bytes' and the flops' times, is
  // so if anything flattering to the kernels where the flops' time is the larger).
  double Flops() const {
    const double D = d.D(), Da = d.Da(), R = 2.0 * kN, Q = d.Q();
    const double gemm = 3 * (2 * D * R + 2 * Da * Q);
    const double vec = 2 * D /*dense read*/ + 2 * D /*dhpre*/ + 4 * d.k * (d.k + d.K) * g_C +
                       2 * D /*stats*/ + 6 * D /*bwd write*/;
    return (gemm + vec) * Tokens();
  }
};

// Seconds spent in each fused phase (summed over both sublayers) during one Step.
// Also the process CPU time of each phase: on a shared machine wall times swing by 3-4x
// with other people's load, CPU time (run with OMP_WAIT_POLICY=passive so idle threads do
// not spin) much less; it is the number to compare between versions of the kernels.
// `copy` is F (out = u, the stand-in sublayer), not residual work: it is timed apart and left
// out of the fused times.
struct Phases {
  double copy = 0, pre = 0, post = 0, restore = 0, bwd_out = 0, bwd_in = 0, bwd_w = 0;
  double Residual() const { return pre + post + restore + bwd_out + bwd_in + bwd_w; }
};
Phases* g_phases = nullptr;  // set while timing the fused path
Phases* g_cpu = nullptr;
double g_mark = 0, g_cpu_mark = 0;
double CpuNow() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}
void Mark(double Phases::*field) {
  const double t = Now(), c = CpuNow();
  if (g_phases) g_phases->*field += t - g_mark;
  if (g_cpu) g_cpu->*field += c - g_cpu_mark;
  g_mark = t, g_cpu_mark = c;
}
void StartMark() { g_mark = Now(), g_cpu_mark = CpuNow(); }

void RunForward(Sublayer& s, float* X, std::vector<float>& u, std::vector<float>& out, bool ref) {
  if (ref) {
    (void)ref::XhcPre(s.cfg, s.P, g_B, g_T, g_C, X, u.data(), &s.cache);
    StartMark();
    std::memcpy(out.data(), u.data(), sizeof(float) * u.size());
    Mark(&Phases::copy);  // F, left out of the reference's time too (Step)
    (void)ref::XhcPost(s.cfg, s.P, out.data(), X, &s.cache);
  } else {
    StartMark();
    (void)XhcPre(s.cfg, s.P, g_B, g_T, g_C, X, u.data(), &s.cache);
    Mark(&Phases::pre);
    std::memcpy(out.data(), u.data(), sizeof(float) * u.size());
    Mark(&Phases::copy);
    (void)XhcPost(s.cfg, s.P, out.data(), X, &s.cache);
    Mark(&Phases::post);
  }
}

// X: in, the state after the sublayer; out, its input (rebuilt for the backward).
void RunBackward(Sublayer& s, float* X, float* dX, std::vector<float>& d_out, bool ref) {
  if (ref) {
    (void)ref::XhcBackwardOut(s.cfg, s.P, dX, &s.cache, d_out.data());
    RestoreInput(s.cache, X);
    (void)ref::XhcBackwardInput(s.cfg, s.P, X, d_out.data(), dX, &s.cache);
    (void)ref::XhcBackwardWeights(s.cfg, s.P, X, s.cache, s.G);
  } else {
    StartMark();
    (void)XhcBackwardOut(s.cfg, s.P, dX, &s.cache, d_out.data());
    Mark(&Phases::bwd_out);
    // du = d_out (F = copy); the stage's input pass, with the restore in it (xhc_ops.h).
    (void)XhcBackwardInputRestoring(s.cfg, s.P, X, d_out.data(), dX, &s.cache);
    Mark(&Phases::bwd_in);
    // The stage's weight pass restores its own copy of the state first (stage_backward.cc);
    // here X is already the input, so the same restore runs again to count its time.
    RestoreInput(s.cache, X);
    Mark(&Phases::restore);
    (void)XhcBackwardWeights(s.cfg, s.P, X, s.cache, s.G);
    Mark(&Phases::bwd_w);
  }
}

struct Buffers {
  std::vector<float> X, dX, u, out, d_out;
};

// Attention then MLP sublayer, forward (and backward), as a stage of the model runs them: the
// forward updates one state in place, and the backward rebuilds each sublayer's input from
// the state after it (RestoreInput, state_restore.h; the runtime keeps one state per
// micro-batch, not one per sublayer). Returns the seconds of residual work: the whole step
// less F (the stand-in sublayer's copy).
double Step(Sublayer& attn, Sublayer& mlp, Buffers& b, bool backward, bool ref) {
  Phases local;
  Phases* saved = g_phases;
  if (!g_phases) g_phases = &local;  // F's time is needed even when phases are not kept
  const double f_before = g_phases->copy;
  const double t0 = Now();
  RunForward(attn, b.X.data(), b.u, b.out, ref);
  RunForward(mlp, b.X.data(), b.u, b.out, ref);
  if (backward) {
    RunBackward(mlp, b.X.data(), b.dX.data(), b.d_out, ref);
    RunBackward(attn, b.X.data(), b.dX.data(), b.d_out, ref);
  }
  const double seconds = Now() - t0 - (g_phases->copy - f_before);
  g_phases = saved;
  return seconds;
}

// The machine's rates for the bound, taken beside every timed step and kept at their best:
// one probe after the run rated the machine by whatever its neighbours did at that moment
// (memcpy 30-53 GB/s between runs a minute apart), and a slow probe shrank the fraction's
// denominator. Best of every round rates the machine at its fastest, as the steps are.
class MachineProbes {
 public:
  MachineProbes()
      : a_(kCopyFloats, 1.0f),
        b_(kCopyFloats, 0.0f),
        x_(static_cast<size_t>(kGemmN) * kGemmN, 0.5f),
        y_(x_),
        z_(x_) {}

  void Measure() {
    gbps_ = std::max(gbps_, MemcpyGbps());
    gflops_ = std::max(gflops_, SgemmGflops());
  }
  double gbps() const { return gbps_; }
  double gflops() const { return gflops_; }

 private:
  static constexpr size_t kCopyFloats = 64u << 20;  // 256 MiB
  static constexpr int kGemmN = 2048;

  double MemcpyGbps() {
    double best = 1e9;
    for (int it = 0; it < 2; ++it) {
      const double t0 = Now();
#pragma omp parallel
      {
        const int nt = omp_get_num_threads(), id = omp_get_thread_num();
        const size_t lo = kCopyFloats * id / nt, hi = kCopyFloats * (id + 1) / nt;
        std::memcpy(b_.data() + lo, a_.data() + lo, (hi - lo) * sizeof(float));
      }
      best = std::min(best, Now() - t0);
    }
    return 2.0 * kCopyFloats * sizeof(float) / best / 1e9;  // read + write traffic
  }

  double SgemmGflops() {
    const int n = kGemmN;
    // All cores. The kernels leave OpenBLAS at 1 thread (gemm_util.cc), so without this the
    // rate (and the bound) would be measured on one core.
    const int saved_threads = openblas_get_num_threads();
    openblas_set_num_threads(omp_get_max_threads());
    const double t0 = Now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, x_.data(), n, y_.data(),
                n, 0.0f, z_.data(), n);
    const double seconds = Now() - t0;
    openblas_set_num_threads(saved_threads);
    return 2.0 * n * n * n / seconds / 1e9;
  }

  std::vector<float> a_, b_, x_, y_, z_;
  double gbps_ = 0, gflops_ = 0;
};

int Main(bool json, bool run_reference) {
  std::mt19937 rng(1234);
  Sublayer attn(false, rng), mlp(true, rng);
  Buffers b;
  std::normal_distribution<float> nd(0.0f, 1.0f);
  b.X.resize(Tokens() * kN * g_C);
  for (auto& v : b.X) v = nd(rng);
  b.dX = b.X;
  b.u.resize(Tokens() * g_C), b.out = b.d_out = b.u;
  const std::vector<float> X0 = b.X;
  auto reset = [&] {
    b.X = X0;
    b.dX = X0;
  };
  reset();
  Step(attn, mlp, b, true, false);  // warm-up (allocations, page faults)
  MachineProbes probes;
  probes.Measure();  // after the warm-up step (buffers filled in the constructor); counts too
  double fwd = 1e9, fwdbwd = 1e9;
  Phases best, best_cpu;
  for (int it = 0; it < g_rounds; ++it) {
    reset(), fwd = std::min(fwd, Step(attn, mlp, b, false, false));
  }
  for (int it = 0; it < g_rounds; ++it) {  // best of R: the machine is shared and noisy
    reset();
    Phases ph, cpu;
    g_phases = &ph, g_cpu = &cpu;
    const double t = Step(attn, mlp, b, true, false);
    g_phases = g_cpu = nullptr;
    if (t < fwdbwd) fwdbwd = t, best = ph;
    if (it == 0 || cpu.Residual() < best_cpu.Residual()) {
      best_cpu = cpu;
    }
    probes.Measure();
  }
  reset();
  const double ref_fwdbwd = run_reference ? Step(attn, mlp, b, true, true) : -1e-3;
  const double bytes = attn.Bytes() + mlp.Bytes(), flops = attn.Flops() + mlp.Flops();
  const double gbps = probes.gbps(), gflops = probes.gflops();
  const double bound = std::max(bytes / (gbps * 1e9), flops / (gflops * 1e9));
  std::printf(
      json ? "{\"tokens\": %zu, \"C\": %d, \"N\": %d, \"k\": %d, \"m\": %d, "
             "\"threads\": %d, \"fused_fwd_ms\": %.2f, \"fused_fwdbwd_ms\": %.2f, "
             "\"reference_fwdbwd_ms\": %.1f, \"bytes\": %.0f, \"flops\": %.0f, "
             "\"memcpy_gbps\": %.2f, \"sgemm_gflops\": %.1f, \"bound_ms\": %.2f, "
             "\"roofline_fraction\": %.3f, \"blas_coretype\": \"%s\", "
             "\"cpu_model\": \"%s\", \"cpu_isas\": \"%s\", \"skinny_isa\": \"%s\", "
             "\"phase_ms\": {\"f_copy\": %.1f, \"pre\": %.1f, \"post\": %.1f, "
             "\"restore\": %.1f, \"bwd_out\": %.1f, \"bwd_input\": %.1f, \"bwd_weights\": %.1f}, "
             "\"phase_cpu_ms\": {\"f_copy\": %.1f, \"pre\": %.1f, \"post\": %.1f, "
             "\"restore\": %.1f, \"bwd_out\": %.1f, \"bwd_input\": %.1f, \"bwd_weights\": %.1f, "
             "\"kernels_total\": %.1f}}\n"
           : "tokens %zu C %d N %d k %d m %d threads %d\nfused fwd %.2f ms, fwd+bwd "
             "%.2f ms, reference fwd+bwd %.1f ms\nbytes %.0f flops %.0f memcpy %.2f "
             "GB/s sgemm %.1f GFLOP/s bound %.2f ms roofline fraction %.3f\n"
             "blas coretype %s\ncpu %s, skinny GEMM paths %s, ran %s\nphases (ms, both sublayers, "
             "best fwd+bwd run): F "
             "copy %.1f pre %.1f post %.1f restore %.1f bwd_out %.1f bwd_input %.1f "
             "bwd_weights %.1f\ncpu time (ms, best run): F copy %.1f pre %.1f post %.1f "
             "restore %.1f bwd_out %.1f bwd_input %.1f bwd_weights %.1f kernels total %.1f\n",
      Tokens(), g_C, kN, kK, kM, omp_get_max_threads(), fwd * 1e3, fwdbwd * 1e3, ref_fwdbwd * 1e3,
      bytes, flops, gbps, gflops, bound * 1e3, bound / fwdbwd,
      getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "default", CpuModelName().c_str(),
      cpu::CpuSkinnyIsas().c_str(), cpu::ActiveSkinnyIsaName(), best.copy * 1e3, best.pre * 1e3,
      best.post * 1e3, best.restore * 1e3, best.bwd_out * 1e3, best.bwd_in * 1e3, best.bwd_w * 1e3,
      best_cpu.copy * 1e3, best_cpu.pre * 1e3, best_cpu.post * 1e3, best_cpu.restore * 1e3,
      best_cpu.bwd_out * 1e3, best_cpu.bwd_in * 1e3, best_cpu.bwd_w * 1e3,
      best_cpu.Residual() * 1e3);
  return 0;
}

}  // namespace
}  // namespace xhc::kernels

// Same environment as the xhc binary (OPENBLAS_CORETYPE for this CPU, passive OpenMP
// waits; see base/process_env.h). The JSON reports the core type used.
int main(int argc, char** argv) {
  xhc::MaybeReexecWithTunedEnv(argv);
  xhc::KeepFreedMemoryInProcess();
  constexpr const char* kUsage =
      "usage: xhc_bench [--json] [--no_reference] [--shape bench|model] [--rounds R] "
      "[--residual xhc|xhc_flash2|xhc_flash4|mhc|mhc_conv|hc|all]\n";
  bool json = false, run_reference = true;  // --no_reference: quick runs while tuning
  std::string residual;                     // --residual V: the variant table instead
  // A flag that is misspelt, or lacks its value, stops the run with the usage: a benchmark
  // that ran something other than what was asked would report the wrong figures.
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const bool has_value = i + 1 < argc;
    if (flag == "--help" || flag == "-h") {
      std::printf("%s", kUsage);
      return 0;
    } else if (flag == "--json") {
      json = true;
    } else if (flag == "--no_reference") {
      run_reference = false;
    } else if (flag == "--residual" && has_value) {
      residual = argv[++i];
    } else if (flag == "--rounds" && has_value) {
      xhc::kernels::g_rounds = std::atoi(argv[++i]);
      if (xhc::kernels::g_rounds < 1) {
        std::fprintf(stderr, "xhc_bench: --rounds: expected a positive count\n");
        return 2;
      }
    } else if (flag == "--shape" && has_value) {
      const std::string shape = argv[++i];
      if (shape == "model") {
        xhc::kernels::g_T = 256, xhc::kernels::g_C = 512;
      } else if (shape != "bench") {
        std::fprintf(stderr, "xhc_bench: --shape: expected bench or model, got '%s'\n",
                     shape.c_str());
        return 2;
      }
    } else {
      const bool takes_value = flag == "--residual" || flag == "--rounds" || flag == "--shape";
      std::fprintf(stderr, "xhc_bench: %s '%s'\n%s",
                   takes_value ? "missing value for" : "unknown argument", flag.c_str(), kUsage);
      return 2;
    }
  }
  // A bad XHC_CPU_ISA is reported before any work (the kernels would abort on first use).
  if (const auto isa = xhc::kernels::cpu::SkinnyIsaFromEnv(); !isa.ok()) {
    std::fprintf(stderr, "xhc_bench: %s\n", std::string(isa.status().message()).c_str());
    return 2;
  }
  if (!residual.empty()) {
    return xhc::kernels::RunVariantBench(
        residual, json,
        {xhc::kernels::g_B, xhc::kernels::g_T, xhc::kernels::g_C, xhc::kernels::g_rounds});
  }
  return xhc::kernels::Main(json, run_reference);
}
