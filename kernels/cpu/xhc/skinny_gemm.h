#ifndef XHC_KERNELS_CPU_XHC_SKINNY_GEMM_H_
#define XHC_KERNELS_CPU_XHC_SKINNY_GEMM_H_

// Skinny products of a small block of tokens (at most kMaxTokens rows) with a wide weight
// matrix W (R rows of length D), for the fused token passes: the caller walks the state in
// token blocks that stay in L2, and these kernels walk W in column chunks that stay in L1/L2,
// so the state block is read from memory once and W once per block.
//
// Determinism: every output element is reduced in a fixed order that depends only on its own
// row and the shapes (not on the block it sits in, nor on the thread). Which instructions
// form the sums depends on the path (skinny_gemm_isa.h): avx512 and avx2 (FMA, DotRows in runs
// of 512 columns: the two give the same bits), generic (separate multiply and add, 16 lanes).
// So results can differ in the last bits between generic and the vector paths (machines, or
// XHC_CPU_ISA), never between runs or thread counts on one.

#include <cstddef>
#include <new>
#include <vector>

#include "kernels/cpu/xhc/skinny_gemm_isa.h"

namespace xhc::kernels::cpu {

constexpr int kMaxTokens = 16;

// out[t * ldo + r] = sum_c X[t * ldx + c] * W[r * ldw + c], t < nt, r < R, c < D.
void DotRows(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
             float* out, int ldo);

// out[t * ldo + c] (+)= sum_r A[t * lda + r] * W[r * ldw + c], t < nt, c < D; the sum over r
// is formed first, then added to out when accumulate (else stored).
void AxpyRows(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw, float* out,
              size_t ldo, bool accumulate);

// Weight-gradient product: out[r * ldo + c] = sum_t A[t * lda + r] * X[t * ldx + c], r < R,
// c < D, t < n (out overwritten). Every element is ONE running sum over t = 0, 1, ..., n-1 in
// that order, from zero, so the bits do not depend on how the caller splits the columns
// (e.g. over threads) or on the shapes of the other elements. Single-threaded: callers
// spread column ranges over threads (AtXColumns in gemm_util.h does). With FMA on both,
// avx512 and avx2 give the same bits here (each element's sum is lane-independent).
// sparse_rows: rows [0, sparse_rows) have mostly zero coefficients (the router's: per token
// only the routed streams' are nonzero), so each such row takes only its nonzero ones (listed
// per token block, in token order) instead of a register tile over every token. Same bits as
// sparse_rows = 0 where X is finite: an FMA (or the generic path's multiply and add) with a
// zero factor adds a signed zero, which leaves the running sum (started at +0, never -0)
// unchanged.
void AtXRows(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx, float* out,
             size_t ldo, int sparse_rows = 0);

// W (R, D) prepared once for many DotRows (or AxpyRows) calls against it: the fused passes
// use one W for every token block, and the vector paths pack W (transposed for DotRows, in
// column chunks for AxpyRows: skinny_gemm_simd.h), which per call costs a large share of a
// token block's product (the unpacked calls are for tests). Made for the path active when
// packing, which it then runs (results are the unpacked call's, bit for bit). The generic
// path reads W in place, as does a call given weights packed for the other product. W must
// outlive it.
// 64-byte aligned storage: the packed tiles are read with aligned vector loads (32 or 64
// bytes), which plain new's 16-byte alignment would fault (or, unaligned, split over lines).
template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlign); }
  bool operator==(const CacheLineAllocator&) const = default;
};

struct SkinnyWeights {
  enum class For { kDotRows, kAxpyRows };
  For product = For::kDotRows;
  SkinnyIsa isa = SkinnyIsa::kGeneric;
  int R = 0, D = 0;
  const float* W = nullptr;
  size_t ldw = 0;
  std::vector<float, CacheLineAllocator<float>> packed;  // path's layout; empty: W in place
};
SkinnyWeights PackForDotRows(int R, int D, const float* W, size_t ldw);

SkinnyWeights PackForAxpyRows(int R, int D, const float* W, size_t ldw);

// DotRows / AxpyRows as above with W = w.
void DotRows(int nt, const SkinnyWeights& w, const float* X, size_t ldx, float* out, int ldo);
void AxpyRows(int nt, const SkinnyWeights& w, const float* A, int lda, float* out, size_t ldo,
              bool accumulate);

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_SKINNY_GEMM_H_
