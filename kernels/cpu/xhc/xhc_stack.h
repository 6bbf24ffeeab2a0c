#ifndef XHC_KERNELS_CPU_XHC_XHC_STACK_H_
#define XHC_KERNELS_CPU_XHC_XHC_STACK_H_

// The optimized path stacks the projection matrices that read the same input, so one sgemm
// reads the state (or the gathered active streams) once: [router; pre] over the full state,
// [res; post] over the active streams.

#include <cstring>
#include <vector>

#include "kernels/cpu/xhc/xhc_types.h"

namespace xhc::kernels {

struct StackedWeights {
  std::vector<float> w;  // (rows, in)
  std::vector<float>
      rowsum;  // (rows) sum over `in` of the router rows (LayerNorm correction), else 0
  int rows = 0;
  int offset = 0;  // column of the first stacked row in the (n, 2N) proj matrix
};

// rowsum of the first `rows` (the router's; only they are read: the LayerNorm correction),
// the others left 0. Each row's sum is one sequential double sum, so the rows are spread over
// threads (on one thread, all 2N rows at N*C = 8192 are a serial ~262k-add dependency chain
// per call).
inline void RouterRowSums(int rows, size_t D, StackedWeights* s) {
  s->rowsum.assign(s->rows, 0.0f);
  const float* w = s->w.data();
  float* out = s->rowsum.data();
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    double acc = 0;
    for (size_t c = 0; c < D; ++c) acc += w[r * D + c];
    out[r] = static_cast<float>(acc);
  }
}

inline StackedWeights StackProjection(const XhcDims& d, const XhcParams& P) {
  StackedWeights s;
  const size_t D = d.D(), N = d.N;
  s.rows = d.has_router ? 2 * d.N : d.N;
  s.offset = d.has_router ? 0 : d.N;
  s.w.resize(s.rows * D);
  size_t row = 0;
  if (d.has_router) {
    std::memcpy(s.w.data(), P.router_weight, sizeof(float) * N * D);
    row = N;
  }
  std::memcpy(s.w.data() + row * D, P.pre_weight, sizeof(float) * N * D);
  RouterRowSums(d.has_router ? d.N : 0, D, &s);
  return s;
}

// xhc_flash window entry: [router; pre_0; ...; pre_{w-1}] over X0, so one pass over the entry
// state projects the routing decision and every read map of the window (spec 4.5).
inline StackedWeights StackFlashProjection(const XhcDims& d, const XhcParams& P) {
  StackedWeights s;
  const size_t D = d.D(), N = d.N;
  s.rows = d.N + d.window * d.N;
  s.w.resize(s.rows * D);
  std::memcpy(s.w.data(), P.router_weight, sizeof(float) * N * D);
  for (int q = 0; q < d.window; ++q) {
    std::memcpy(s.w.data() + (N + q * N) * D, P.window_pre_weight[q], sizeof(float) * N * D);
  }
  RouterRowSums(d.N, D, &s);
  return s;
}

inline StackedWeights StackMaps(const XhcDims& d, const XhcParams& P) {
  StackedWeights s;
  const size_t Da = d.Da(), kk = d.Rres(), kK = d.k * d.K;  // no res rows inside a flash window
  s.rows = d.Q();
  s.w.resize(s.rows * Da);
  if (kk > 0) std::memcpy(s.w.data(), P.res_weight, sizeof(float) * kk * Da);
  std::memcpy(s.w.data() + kk * Da, P.post_weight, sizeof(float) * kK * Da);
  return s;
}

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_XHC_STACK_H_
