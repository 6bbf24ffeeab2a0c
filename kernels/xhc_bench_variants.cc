// xhc_bench --residual: every residual variant's sublayer work at one size (see the header).
//
// Byte model of the fused forward, per token per sublayer, in floats of width C (the paper's
// Table 4 accounting counts the same reads and writes of the residual state and the sublayer
// input/output; our passes read the state once per XhcPre, where the paper's unfused xHC reads
// it twice):
//   xhc, mhc (k = N) XhcPre reads the state (N), writes u (1) and the gathered streams (k);
//                    XhcPost reads out (1) and xa (k), writes the K components (K) and the k
//                    written streams (k).
//   xhc_flash        window entry as xhc plus w - 1 base readouts written; later sublayers
//                    gather the k active streams (k) and read their base (1) instead of the
//                    state; XhcPost as xhc (no mixing inside the window).
//   hc               XhcPre reads the state (N), writes u (1) and the old state (N); XhcPost
//                    reads out (1) and the old state (N), writes out (1) and all streams (N).
// Measured times are best-of-3 wall times of the fused path on this machine.

#include "kernels/xhc_bench_variants.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/xhc/xhc_ops.h"

namespace xhc::kernels {
namespace {

struct VariantSpec {
  const char* name;
  ResidualType type;
  int N, k, m;
  std::vector<int> kernels;
  int window;      // sublayers in the timed group (a block, or a flash window)
  double paper_C;  // Table 4, per token per sublayer; < 0: not reported
};

const std::vector<VariantSpec>& Variants() {
  static const auto* v = new std::vector<VariantSpec>{
      {"xhc", ResidualType::kXhc, 16, 4, 2, {4, 8, 12}, 2, 73.5},
      {"xhc_flash2", ResidualType::kXhcFlash, 16, 4, 2, {4, 8, 12}, 2, 51.0},
      {"xhc_flash4", ResidualType::kXhcFlash, 16, 4, 2, {4, 8, 12}, 4, 40.0},
      {"mhc", ResidualType::kMhc, 4, 4, 4, {}, 2, 34.0},
      {"mhc_conv", ResidualType::kMhc, 4, 4, 4, {4, 8, 12}, 2, -1},
      {"hc", ResidualType::kHc, 4, 4, 4, {}, 2, -1},
  };
  return *v;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One sublayer's parameters and gradients, owned.
struct Sub {
  XhcConfig cfg;
  XhcDims d;
  std::vector<std::unique_ptr<std::vector<float>>> store;
  XhcParams P;
  XhcGrads G;
  XhcCache cache;

  float* Add(size_t n, float scale, float offset, std::mt19937& rng) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    store.push_back(std::make_unique<std::vector<float>>(n));
    for (auto& v : *store.back()) v = offset + scale * nd(rng);
    return store.back()->data();
  }
  // value ~ scale * N(0, 1) + offset, and a zeroed gradient of the same size.
  void Pair(const float** p, float** g, size_t n, float scale, float offset, std::mt19937& rng) {
    *p = Add(n, scale, offset, rng);
    *g = Add(n, 0, 0, rng);
  }

  Sub(const VariantSpec& v, int pos, int C_model, std::mt19937& rng) {
    cfg.type = v.type;
    cfg.n_streams = v.N, cfg.n_active = v.k, cfg.n_fixed = v.m;
    cfg.is_mlp = pos % 2 == 1;
    cfg.conv_kernels = v.kernels;
    if (v.type == ResidualType::kHc) cfg.conv_kernels.clear();
    if (v.type == ResidualType::kXhcFlash) cfg.window = v.window, cfg.window_pos = pos;
    d = ResolveDims(cfg, C_model).value();
    const size_t D = d.D(), Da = d.Da(), C = C_model, N = d.N;
    if (d.hc) {
      Pair(&P.pre_weight, &G.pre_weight, C, 0.02f, 0, rng);
      Pair(&P.post_weight, &G.post_weight, C, 0.02f, 0, rng);
      Pair(&P.res_weight, &G.res_weight, N * C, 0.02f, 0, rng);
      Pair(&P.pre_bias, &G.pre_bias, N, 0.1f, 0.25f, rng);
      Pair(&P.post_bias, &G.post_bias, N, 0.1f, 1, rng);
      Pair(&P.res_bias, &G.res_bias, N * N, 0.1f, 0.25f, rng);
    } else {
      if (d.has_router) {
        Pair(&P.router_weight, &G.router_weight, N * D, 0.02f, 0, rng);
        Pair(&P.router_bias, &G.router_bias, N, 0.1f, 0, rng);
      }
      Pair(&P.pre_weight, &G.pre_weight, N * D, 0.02f, 0, rng);
      Pair(&P.pre_bias, &G.pre_bias, N, 0.1f, 0, rng);
      if (d.has_mix) {
        Pair(&P.res_weight, &G.res_weight, d.k * d.k * Da, 0.02f, 0, rng);
        Pair(&P.res_bias, &G.res_bias, d.k * d.k, 0.25f, 0, rng);
      }
      Pair(&P.post_weight, &G.post_weight, d.k * d.K * Da, 0.02f, 0, rng);
      Pair(&P.post_bias, &G.post_bias, d.k * d.K, 0.1f, 0, rng);
    }
    Pair(&P.pre_alpha, &G.pre_alpha, 1, 0, 0.01f, rng);
    Pair(&P.post_alpha, &G.post_alpha, 1, 0, 0.01f, rng);
    if (d.has_mix) Pair(&P.res_alpha, &G.res_alpha, 1, 0, 0.01f, rng);
    for (int j = 0; j < d.r; ++j) {
      const float* w;
      float* g;
      Pair(&w, &g, d.kernels[j] * C, 0.1f, 0, rng);
      P.conv_weight.push_back(w);
      G.conv_weight.push_back(g);
    }
  }

  // Modelled forward bytes of this sublayer per token, in floats of width C.
  double ForwardFloatsPerC() const {
    const double N = d.N, k = d.k, K = d.K;
    if (d.hc) return N + 1 + N + 1 + N + 1 + N;
    const double post = 1 + k + K + k;
    if (!d.flash) return N + 1 + k + post;
    if (d.pos == 0) return N + 1 + k + (d.window - 1) + post;
    return k + 1 + 1 + k + post;
  }
};

struct Timing {
  double fwd_s = 1e9, fwdbwd_s = 1e9;
};

// A kernel error here is a bug in the bench's setup: say so and stop.
void Check(const absl::Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "xhc_bench --residual: %s: %s\n", what, std::string(s.message()).c_str());
  std::exit(1);
}

// Forward (and backward) of the group; X is reset from X0 first.
double RunGroup(const VariantBenchShape& shape, std::vector<Sub>& subs,
                const std::vector<float>& X0, std::vector<float>& X, std::vector<float>& dX,
                std::vector<float>& u, bool backward) {
  X = X0;
  const double t0 = Now();
  for (size_t q = 0; q < subs.size(); ++q) {
    Sub& s = subs[q];
    if (s.d.flash && q > 0) s.cache.window = subs[0].cache.window;
    Check(XhcPre(s.cfg, s.P, shape.B, shape.T, shape.C, X.data(), u.data(), &s.cache), "XhcPre");
    Check(XhcPost(s.cfg, s.P, u.data(), X.data(), &s.cache), "XhcPost");  // F = copy
  }
  if (backward) {
    // X_in for the backward: X0 serves as every sublayer's input here (the timing, not the
    // values, is what this measures; the model rebuilds exact inputs, state_restore.h).
    dX = X0;
    for (size_t q = subs.size(); q-- > 0;) {
      Sub& s = subs[q];
      Check(XhcBackwardOut(s.cfg, s.P, dX.data(), &s.cache, u.data()), "XhcBackwardOut");
      Check(XhcBackwardInput(s.cfg, s.P, X0.data(), u.data(), dX.data(), &s.cache),
            "XhcBackwardInput");
    }
    for (Sub& s : subs) {
      Check(XhcBackwardWeights(s.cfg, s.P, X0.data(), s.cache, s.G), "XhcBackwardWeights");
    }
  }
  return Now() - t0;
}

}  // namespace

int RunVariantBench(const std::string& which, bool json, const VariantBenchShape& shape) {
  std::vector<const VariantSpec*> chosen;
  std::vector<std::string> names;
  for (const VariantSpec& v : Variants()) {
    names.push_back(v.name);
    if (which == "all" || which == v.name) chosen.push_back(&v);
  }
  if (chosen.empty()) {
    std::fprintf(stderr, "xhc_bench: --residual %s: expected all or one of %s\n", which.c_str(),
                 absl::StrJoin(names, ", ").c_str());
    return 2;
  }
  std::vector<std::string> rows;
  for (const VariantSpec* v : chosen) {
    std::mt19937 rng(1234);
    std::vector<Sub> subs;
    subs.reserve(v->window);
    for (int q = 0; q < v->window; ++q) subs.emplace_back(*v, q, shape.C, rng);
    if (v->type == ResidualType::kXhcFlash) {  // the entry projects every read map (spec 4.5)
      for (const Sub& s : subs) {
        subs[0].P.window_pre_weight.push_back(s.P.pre_weight);
        subs[0].P.window_pre_bias.push_back(s.P.pre_bias);
        subs[0].P.window_pre_alpha.push_back(s.P.pre_alpha);
      }
    }
    const size_t tokens = static_cast<size_t>(shape.B) * shape.T;
    const size_t state = tokens * v->N * shape.C;
    std::vector<float> X0(state), X, dX, u(tokens * shape.C);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& e : X0) e = nd(rng);
    RunGroup(shape, subs, X0, X, dX, u, true);  // warm-up: allocations, page faults
    Timing t;
    for (int it = 0; it < shape.rounds; ++it) {
      t.fwd_s = std::min(t.fwd_s, RunGroup(shape, subs, X0, X, dX, u, false));
    }
    for (int it = 0; it < shape.rounds; ++it) {
      t.fwdbwd_s = std::min(t.fwdbwd_s, RunGroup(shape, subs, X0, X, dX, u, true));
    }
    double floats = 0;
    for (const Sub& s : subs) floats += s.ForwardFloatsPerC();
    const double per_sub_C = floats / v->window;
    const double fwd_ms = t.fwd_s * 1e3 / v->window, fwdbwd_ms = t.fwdbwd_s * 1e3 / v->window;
    const double gbps = per_sub_C * shape.C * 4.0 * tokens / (fwd_ms * 1e-3) / 1e9;
    rows.push_back(absl::StrFormat(
        "\"%s\": {\"N\": %d, \"k\": %d, \"sublayers\": %d, \"fwd_bytes_per_token_per_sublayer_C\": "
        "%.1f, \"paper_table4_C\": %s, \"fwd_ms_per_sublayer\": %.2f, "
        "\"fwdbwd_ms_per_sublayer\": %.2f, \"fwd_effective_gbps\": %.2f}",
        v->name, v->N, v->k, v->window, per_sub_C,
        v->paper_C < 0 ? std::string("null") : absl::StrFormat("%.1f", v->paper_C), fwd_ms,
        fwdbwd_ms, gbps));
    if (!json) {
      std::printf(
          "%-11s N=%-2d fwd %5.1fC per token per sublayer (paper %s) fwd %.2f ms, "
          "fwd+bwd %.2f ms per sublayer\n",
          v->name, v->N, per_sub_C,
          v->paper_C < 0 ? "-" : absl::StrFormat("%.1fC", v->paper_C).c_str(), fwd_ms, fwdbwd_ms);
    }
  }
  if (json) {
    std::printf(
        "{\"tokens\": %d, \"C\": %d, \"rounds\": %d, \"threads\": %d, "
        "\"variants\": {%s}}\n",
        shape.B * shape.T, shape.C, shape.rounds, omp_get_max_threads(),
        absl::StrJoin(rows, ", ").c_str());
  }
  return 0;
}

}  // namespace xhc::kernels
