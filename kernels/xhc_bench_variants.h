#ifndef XHC_KERNELS_XHC_BENCH_VARIANTS_H_
#define XHC_KERNELS_XHC_BENCH_VARIANTS_H_

#include <string>

namespace xhc::kernels {

// The size the variant table runs at: xhc_bench's --shape (B sequences of T tokens, width C)
// and --rounds (each time is the best of that many runs).
struct VariantBenchShape {
  int B = 4, T = 1024, C = 1024, rounds = 5;
};

// `xhc_bench --residual V` (V: xhc, xhc_flash2, xhc_flash4, mhc, mhc_conv, hc, or all): one
// window of each variant's residual sublayers (F = copy) at `shape`, timed forward and
// forward+backward, next to the bytes per token per sublayer its fused forward moves
// (modelled from the passes, in units of C) and the paper's Table 4 figure. Prints one JSON
// object. Returns the process exit code.
int RunVariantBench(const std::string& which, bool json, const VariantBenchShape& shape);

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_XHC_BENCH_VARIANTS_H_
