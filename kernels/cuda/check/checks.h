#ifndef XHC_KERNELS_CUDA_CHECK_CHECKS_H_
#define XHC_KERNELS_CUDA_CHECK_CHECKS_H_

// GPU-vs-CPU-reference checks shared by the gtest suite (Bazel, real Abseil) and the
// standalone device check binary (plain nvcc + g++, Abseil shim): one implementation, so
// what the device script reports is exactly what the tests assert.
//
// Each check: fresh random inputs, bf16-rounded where the GPU stores bf16 (so both sides
// see the same numbers), outputs poisoned with NaN bit patterns before each launch (an
// element the kernel forgets to write fails), then compare.h's bounds: the tensor's relative
// error and every element's error, both scaled by magnitude, the xHC state's written and
// untouched streams judged apart, and a NaN count that must be 0.

#include <cstdint>
#include <string>
#include <vector>

namespace xhc::cuda::check {

// One output's verdict (compare.h computes it).
struct Result {
  std::string name;
  double rel_err = 0;        // ||gpu - ref|| / ||ref||
  double tol = 0;
  double worst_element = 0;  // max |gpu - ref| / its element bound (compare.h); <= 1 passes
  long worst_index = -1;
  long nan_count = 0;
  std::string note;  // e.g. a launch error
  bool ok() const {
    return note.empty() && nan_count == 0 && rel_err <= tol && worst_element <= 1.0;
  }
};

struct XhcCase {
  int B = 2, T = 9, N = 16, k = 4, m = 2, C = 40;
  bool mlp = false;  // MLP side: conv kernels {4, 8, 12} (K = 4)
  bool mhc = false;  // dense baseline (k = N, no router)
  bool gram_schmidt = true;
  int sinkhorn_iters = 20;
  std::string Name() const;
};

// Forward (u, X_new, maps) and backward (d_out, dX_in, every weight gradient) of the xHC
// sublayer against kernels/cpu/xhc reference.
std::vector<Result> CheckXhc(const XhcCase& c, uint64_t seed);
// Transformer ops against kernels/cpu/nn references: GEMM fwd/bwd, RMSNorm, RoPE, SwiGLU,
// attention, cross-entropy, AdamW (several shapes including tails).
std::vector<Result> CheckNn(uint64_t seed);

}  // namespace xhc::cuda::check

#endif  // XHC_KERNELS_CUDA_CHECK_CHECKS_H_
