// DotRows / AxpyRows (skinny_gemm.h): the dispatcher to the active path (skinny_gemm_isa.h)
// and the portable versions (separate multiply and add, 16 lanes per partial sum).

#include "kernels/cpu/xhc/skinny_gemm.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/xhc/skinny_gemm_kernels.h"

namespace xhc::kernels::cpu {
namespace internal {
namespace {

constexpr int kL = 16;           // lanes of every partial sum
constexpr int kAxpyChunk = 512;  // tmp row stays in L1

}  // namespace

void DotRowsGeneric(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
                    float* out, int ldo) {
  for (int t = 0; t < nt; ++t) {
    const float* __restrict x = X + t * ldx;
    for (int r = 0; r < R; ++r) {
      const float* __restrict w = W + r * ldw;
      float acc[kL] = {};
      int c = 0;
      for (; c + kL <= D; c += kL)
        for (int l = 0; l < kL; ++l) acc[l] += x[c + l] * w[c + l];
      for (int l = 0; c < D; ++c, ++l) acc[l] += x[c] * w[c];
      float s = 0;
      for (int l = 0; l < kL; ++l) s += acc[l];
      out[t * ldo + r] = s;
    }
  }
}

void AxpyRowsGeneric(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw,
                     float* out, size_t ldo, bool accumulate) {
  float tmp[kAxpyChunk];
  for (int c0 = 0; c0 < D; c0 += kAxpyChunk) {
    const int cl = std::min(kAxpyChunk, D - c0);
    for (int t = 0; t < nt; ++t) {
      const float* a = A + t * lda;
      std::fill(tmp, tmp + cl, 0.0f);
      for (int r = 0; r < R; ++r) {
        const float ar = a[r];
        const float* __restrict w = W + r * ldw + c0;
        for (int c = 0; c < cl; ++c) tmp[c] += ar * w[c];
      }
      float* __restrict o = out + t * ldo + c0;
      if (accumulate) {
        for (int c = 0; c < cl; ++c) o[c] += tmp[c];
      } else {
        std::memcpy(o, tmp, sizeof(float) * cl);
      }
    }
  }
}

void AtXRowsGeneric(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx,
                    float* out, size_t ldo, int sparse_rows) {
  for (int r = 0; r < R; ++r) std::fill(out + r * ldo, out + r * ldo + D, 0.0f);
  for (int t = 0; t < n; ++t) {
    const float* __restrict x = X + t * ldx;
    for (int r = 0; r < R; ++r) {
      const float a = A[static_cast<size_t>(t) * lda + r];
      if (r < sparse_rows && a == 0.0f) continue;
      float* __restrict o = out + r * ldo;
      for (int c = 0; c < D; ++c) o[c] += a * x[c];
    }
  }
}

}  // namespace internal

namespace {

void DotRowsOn(SkinnyIsa isa, int nt, int R, int D, const float* X, size_t ldx, const float* W,
               size_t ldw, float* out, int ldo) {
  switch (isa) {
#ifdef XHC_SKINNY_X86
    case SkinnyIsa::kAvx512: return internal::DotRowsAvx512(nt, R, D, X, ldx, W, ldw, out, ldo);
    case SkinnyIsa::kAvx2: return internal::DotRowsAvx2(nt, R, D, X, ldx, W, ldw, out, ldo);
#endif
    default: return internal::DotRowsGeneric(nt, R, D, X, ldx, W, ldw, out, ldo);
  }
}

void AxpyRowsOn(SkinnyIsa isa, int nt, int R, int D, const float* A, int lda, const float* W,
                size_t ldw, float* out, size_t ldo, bool accumulate) {
  switch (isa) {
#ifdef XHC_SKINNY_X86
    case SkinnyIsa::kAvx512:
      return internal::AxpyRowsAvx512(nt, R, D, A, lda, W, ldw, out, ldo, accumulate);
    case SkinnyIsa::kAvx2:
      return internal::AxpyRowsAvx2(nt, R, D, A, lda, W, ldw, out, ldo, accumulate);
#endif
    default: return internal::AxpyRowsGeneric(nt, R, D, A, lda, W, ldw, out, ldo, accumulate);
  }
}

}  // namespace

void DotRows(int nt, int R, int D, const float* X, size_t ldx, const float* W, size_t ldw,
             float* out, int ldo) {
  for (int t0 = 0; t0 < nt; t0 += kMaxTokens) {
    DotRowsOn(ActiveSkinnyIsa(), std::min(kMaxTokens, nt - t0), R, D, X + t0 * ldx, ldx, W, ldw,
              out + t0 * ldo, ldo);
  }
}

void AxpyRows(int nt, int R, int D, const float* A, int lda, const float* W, size_t ldw, float* out,
              size_t ldo, bool accumulate) {
  for (int t0 = 0; t0 < nt; t0 += kMaxTokens) {
    AxpyRowsOn(ActiveSkinnyIsa(), std::min(kMaxTokens, nt - t0), R, D, A + t0 * lda, lda, W, ldw,
               out + t0 * ldo, ldo, accumulate);
  }
}

void AtXRows(int n, int R, int D, const float* A, int lda, const float* X, size_t ldx, float* out,
             size_t ldo, int sparse_rows) {
  sparse_rows = std::clamp(sparse_rows, 0, R);
  switch (ActiveSkinnyIsa()) {
#ifdef XHC_SKINNY_X86
    case SkinnyIsa::kAvx512:
      return internal::AtXRowsAvx512(n, R, D, A, lda, X, ldx, out, ldo, sparse_rows);
    case SkinnyIsa::kAvx2:
      return internal::AtXRowsAvx2(n, R, D, A, lda, X, ldx, out, ldo, sparse_rows);
#endif
    default: return internal::AtXRowsGeneric(n, R, D, A, lda, X, ldx, out, ldo, sparse_rows);
  }
}

namespace {

// W in the active path's layout for `product` (the generic path reads W in place).
SkinnyWeights PackFor(SkinnyWeights::For product, int R, int D, const float* W, size_t ldw) {
  SkinnyWeights w;
  w.product = product;
  w.isa = ActiveSkinnyIsa();
  w.R = R, w.D = D, w.W = W, w.ldw = ldw;
#ifdef XHC_SKINNY_X86
  const bool dot = product == SkinnyWeights::For::kDotRows;
  if (w.isa == SkinnyIsa::kAvx512) {
    (dot ? internal::PackDotRowsAvx512 : internal::PackAxpyRowsAvx512)(R, D, W, ldw, &w.packed);
  }
  if (w.isa == SkinnyIsa::kAvx2) {
    (dot ? internal::PackDotRowsAvx2 : internal::PackAxpyRowsAvx2)(R, D, W, ldw, &w.packed);
  }
#endif
  return w;
}

}  // namespace

SkinnyWeights PackForDotRows(int R, int D, const float* W, size_t ldw) {
  return PackFor(SkinnyWeights::For::kDotRows, R, D, W, ldw);
}

SkinnyWeights PackForAxpyRows(int R, int D, const float* W, size_t ldw) {
  return PackFor(SkinnyWeights::For::kAxpyRows, R, D, W, ldw);
}

void DotRows(int nt, const SkinnyWeights& w, const float* X, size_t ldx, float* out, int ldo) {
  for (int t0 = 0; t0 < nt; t0 += kMaxTokens) {
    const int n = std::min(kMaxTokens, nt - t0);
#ifdef XHC_SKINNY_X86
    if (!w.packed.empty() && w.product == SkinnyWeights::For::kDotRows) {
      if (w.isa == SkinnyIsa::kAvx512) {
        internal::DotRowsAvx512Packed(n, w.R, w.D, X + t0 * ldx, ldx, w.packed.data(),
                                      out + t0 * ldo, ldo);
      } else {
        internal::DotRowsAvx2Packed(n, w.R, w.D, X + t0 * ldx, ldx, w.packed.data(), out + t0 * ldo,
                                    ldo);
      }
      continue;
    }
#endif
    DotRowsOn(w.isa, n, w.R, w.D, X + t0 * ldx, ldx, w.W, w.ldw, out + t0 * ldo, ldo);
  }
}

void AxpyRows(int nt, const SkinnyWeights& w, const float* A, int lda, float* out, size_t ldo,
              bool accumulate) {
  for (int t0 = 0; t0 < nt; t0 += kMaxTokens) {
    const int n = std::min(kMaxTokens, nt - t0);
    const float* a = A + t0 * lda;
    float* o = out + t0 * ldo;
#ifdef XHC_SKINNY_X86
    if (!w.packed.empty() && w.product == SkinnyWeights::For::kAxpyRows) {
      if (w.isa == SkinnyIsa::kAvx512) {
        internal::AxpyRowsAvx512Packed(n, w.R, w.D, a, lda, w.packed.data(), o, ldo, accumulate);
      } else {
        internal::AxpyRowsAvx2Packed(n, w.R, w.D, a, lda, w.packed.data(), o, ldo, accumulate);
      }
      continue;
    }
#endif
    AxpyRowsOn(w.isa, n, w.R, w.D, a, lda, w.W, w.ldw, o, ldo, accumulate);
  }
}

}  // namespace xhc::kernels::cpu
