// AVX-512 versions of DotRows / AxpyRows / AtXRows (skinny_gemm.h): the kernels of
// skinny_gemm_simd.h over 16-lane vectors (measured on AMD EPYC Zen 5 and Zen 4:
// docs/design/skinny-gemm-and-isa-dispatch.md).
// Compiled for AVX-512F by pragma (the build targets x86-64-v2); run only where the CPU has it
// (skinny_gemm_isa.h).

#include "kernels/cpu/xhc/skinny_gemm_kernels.h"

#ifdef XHC_SKINNY_X86
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

// Everything of the standard library that skinny_gemm_simd.h uses is included above the
// pragma: an inline library function compiled here for this ISA could otherwise be the copy
// the linker keeps for every caller (and fault on a CPU without it).
#if defined(__clang__)  // the fuzz build (.bazelrc config fuzz)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif

namespace xhc::kernels::cpu::internal {
namespace {

struct Avx512 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kL = 16;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static V LoadA(const float* p) { return _mm512_load_ps(p); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void StoreA(float* p, V v) { _mm512_store_ps(p, v); }
  static V Bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static Mask TailMask(int n) { return static_cast<Mask>((1u << n) - 1); }
  static V LoadMasked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void StoreMasked(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static V Pin(V v) {
    __asm__("" : "+v"(v));
    return v;
  }
  static void Prefetch(const float* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  }
  static void PrefetchL2(const float* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1);
  }
};

}  // namespace
}  // namespace xhc::kernels::cpu::internal

#include "kernels/cpu/xhc/skinny_gemm_simd.h"

XHC_SKINNY_ENTRY_POINTS(Avx512)

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // XHC_SKINNY_X86
