// AVX2 + FMA versions of DotRows / AxpyRows / AtXRows (skinny_gemm.h): the kernels of
// skinny_gemm_simd.h over 8-lane vectors, for CPUs without AVX-512 (tuned on AMD EPYC Zen 3).
// Compiled for AVX2 by pragma (the build targets x86-64-v2); run only where the CPU has it
// (skinny_gemm_isa.h).

#include "kernels/cpu/xhc/skinny_gemm_kernels.h"

#ifdef XHC_SKINNY_X86
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

// Everything of the standard library that skinny_gemm_simd.h uses is included above the
// pragma: an inline library function compiled here for this ISA could otherwise be the copy
// the linker keeps for every caller (and fault on a CPU without it).
#if defined(__clang__)  // the fuzz build (.bazelrc config fuzz)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace xhc::kernels::cpu::internal {
namespace {

struct Avx2 {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int kL = 8;
  static V Zero() { return _mm256_setzero_ps(); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static V LoadA(const float* p) { return _mm256_load_ps(p); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void StoreA(float* p, V v) { _mm256_store_ps(p, v); }
  static V Bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static Mask TailMask(int n) {
    alignas(32) static const int32_t kOnes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                  0,  0,  0,  0,  0,  0,  0,  0};
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kOnes + kL - n));
  }
  static V LoadMasked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void StoreMasked(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
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

XHC_SKINNY_ENTRY_POINTS(Avx2)

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#endif  // XHC_SKINNY_X86
