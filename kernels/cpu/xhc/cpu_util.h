#ifndef XHC_KERNELS_CPU_XHC_CPU_UTIL_H_
#define XHC_KERNELS_CPU_XHC_CPU_UTIL_H_

// Small vectorizable helpers and the token-parallel loop of the optimized path.
// Token loops use schedule(dynamic): each token's (or token block's) result does not depend on
// which thread computes it, so this keeps determinism and lets a thread that the (shared,
// 2-core) machine descheduled not hold up the other.
// Reductions use a fixed number of lanes combined in a fixed order, so a result depends only
// on the data, never on the thread that computed it.

#include <cstddef>

namespace xhc::kernels::cpu {

constexpr int kLanes = 16;

// The build targets x86-64-v2 (SSE4): the per-token functions are compiled three times and
// picked at load time by CPU (ifunc). The library builds with -ffp-contract=off, so every
// clone does the same float operations in the same order (the fixed kLanes lanes above):
// results are bit-identical whichever clone runs.
// ThreadSanitizer builds keep one version: the ifunc resolver runs during relocation, before
// the TSan runtime is initialised, and its instrumented code crashes there.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define XHC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define XHC_INLINE inline __attribute__((always_inline))
#else
#define XHC_CLONES
#define XHC_INLINE inline
#endif
// XHC_INLINE: the helpers below must be inlined into each clone to run at its width (GCC left
// MultiDot out of line, i.e. at the SSE width, in the AVX-512 clone).

// The kLanes lanes as two 8-lane GCC vectors (one ymm each in the AVX2 / AVX-512 clones,
// 2 xmm in the default one): written as plain `for l < kLanes` loops, GCC 12 vectorised the
// outer loop of these reductions into long shuffle sequences (perf: most of XhcPre's time).
// A single 64-byte vector type was fine in the AVX-512 clone but GCC's lowering of it for
// AVX2 kept the accumulators on the stack and moved them through integer registers (perf on
// AMD EPYC Zen 3: TokenPre's SumSq loop). Lane-wise vector arithmetic is the same arithmetic
// whichever split, so results are unchanged (and bit-identical across clones).
typedef float V8 __attribute__((vector_size(8 * sizeof(float))));
struct V16 {
  V8 lo, hi;  // lanes 0-7, 8-15: the memory layout of 16 floats
  XHC_INLINE V16& operator+=(const V16& o) {
    lo += o.lo, hi += o.hi;
    return *this;
  }
};
static_assert(sizeof(V16) == kLanes * sizeof(float));
XHC_INLINE V16 operator*(const V16& a, const V16& b) { return {a.lo * b.lo, a.hi * b.hi}; }
XHC_INLINE V16 operator*(float s, const V16& b) { return {s * b.lo, s * b.hi}; }
// Loads / stores one half at a time: a memcpy of the whole struct went through the stack in
// 16-byte pieces that a 32-byte load then read back (a store-forwarding stall per load).
XHC_INLINE V16 LoadV(const float* p) {
  V16 v;
  __builtin_memcpy(&v.lo, p, sizeof(V8));
  __builtin_memcpy(&v.hi, p + 8, sizeof(V8));
  return v;
}
XHC_INLINE void StoreV(float* p, const V16& v) {
  __builtin_memcpy(p, &v.lo, sizeof(V8));
  __builtin_memcpy(p + 8, &v.hi, sizeof(V8));
}

XHC_INLINE float Dot(int n, const float* __restrict a, const float* __restrict b) {
  float acc[kLanes] = {};
  int c = 0;
  {
    V16 v = {};
    for (; c + kLanes <= n; c += kLanes) v += LoadV(a + c) * LoadV(b + c);
    StoreV(acc, v);
  }
  for (int l = 0; c < n; ++c, ++l) acc[l] += a[c] * b[c];
  float s = 0;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}

// MultiDot for a compile-time count of streams, whose accumulators then stay in registers.
template <int M>
XHC_INLINE void MultiDotFixed(int n, const float* __restrict a, const float* __restrict x, int ldx,
                              float* dots) {
  float acc[M][kLanes] = {};
  int c = 0;
  {
    V16 v[M] = {};
    for (; c + kLanes <= n; c += kLanes) {
      const V16 av = LoadV(a + c);
      for (int i = 0; i < M; ++i) v[i] += av * LoadV(x + static_cast<size_t>(i) * ldx + c);
    }
    for (int i = 0; i < M; ++i) StoreV(acc[i], v[i]);
  }
  for (int i = 0; i < M; ++i)
    for (int l = 0, cc = c; cc < n; ++cc, ++l)
      acc[i][l] += a[cc] * x[static_cast<size_t>(i) * ldx + cc];
  for (int i = 0; i < M; ++i) {
    float s = 0;
    for (int l = 0; l < kLanes; ++l) s += acc[i][l];
    dots[i] = s;
  }
}

// dots[i] = Dot(n, a, x + i * ldx) for i < m, bit-identical to m separate Dot calls (each
// output keeps its own kLanes lanes in the same order), 4 streams per sweep: a is loaded once
// per 4 streams, and their 8 (AVX2) accumulators stay in registers, where all 16 streams' in
// one sweep (32 ymm) lived on the stack, each update a load and a store.
XHC_INLINE void MultiDot(int n, const float* __restrict a, int m, const float* __restrict x,
                         int ldx, float* dots) {
  int i = 0;
  for (; i + 4 <= m; i += 4) {
    MultiDotFixed<4>(n, a, x + static_cast<size_t>(i) * ldx, ldx, dots + i);
  }
  switch (m - i) {
    case 3: return MultiDotFixed<3>(n, a, x + static_cast<size_t>(i) * ldx, ldx, dots + i);
    case 2: return MultiDotFixed<2>(n, a, x + static_cast<size_t>(i) * ldx, ldx, dots + i);
    case 1: return MultiDotFixed<1>(n, a, x + static_cast<size_t>(i) * ldx, ldx, dots + i);
    default: return;
  }
}

// y = sum_i h[i] * x_i (x_i = x + i * ldx), summed in order i = 0, 1, ... from 0: bit-identical
// to zeroing y then m Axpy calls, with the m streams read in one sweep and y written once.
XHC_INLINE void WeightedSum(int n, int m, const float* __restrict h, const float* __restrict x,
                            int ldx, float* __restrict y) {
  constexpr int kW = 4 * kLanes;
  int c = 0;
  for (; c + kW <= n; c += kW) {
    V16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
    for (int i = 0; i < m; ++i) {
      const float hi = h[i];
      const float* __restrict xi = x + static_cast<size_t>(i) * ldx + c;
      a0 += hi * LoadV(xi), a1 += hi * LoadV(xi + kLanes);
      a2 += hi * LoadV(xi + 2 * kLanes), a3 += hi * LoadV(xi + 3 * kLanes);
    }
    StoreV(y + c, a0), StoreV(y + c + kLanes, a1);
    StoreV(y + c + 2 * kLanes, a2), StoreV(y + c + 3 * kLanes, a3);
  }
  for (; c < n; ++c) {
    float acc = 0;
    for (int i = 0; i < m; ++i) acc += h[i] * x[static_cast<size_t>(i) * ldx + c];
    y[c] = acc;
  }
}

// WeightedSums for a compile-time count of outputs: the accumulators are set one by one
// (an `= {}` array of them was cleared through memory with `rep stos` on every chunk, and the
// array stayed on the stack: perf on Zen 3, a third of TokenFlashEntry's samples;
// docs/design/skinny-gemm-and-isa-dispatch.md).
template <int NO>
XHC_INLINE void WeightedSumsFixed(int n, int m, const float* __restrict h,
                                  const float* __restrict x, int ldx, float* __restrict y,
                                  int ldy) {
  constexpr int kW = 2 * kLanes;
  int c = 0;
  for (; c + kW <= n; c += kW) {
    V16 a[NO][2];
#pragma GCC unroll 4
    for (int o = 0; o < NO; ++o) a[o][0] = V16{}, a[o][1] = V16{};
    for (int i = 0; i < m; ++i) {
      const float* __restrict xi = x + static_cast<size_t>(i) * ldx + c;
      const V16 x0 = LoadV(xi), x1 = LoadV(xi + kLanes);
#pragma GCC unroll 4
      for (int o = 0; o < NO; ++o) {
        const float hi = h[o * m + i];
        a[o][0] += hi * x0, a[o][1] += hi * x1;
      }
    }
#pragma GCC unroll 4
    for (int o = 0; o < NO; ++o) {
      StoreV(y + static_cast<size_t>(o) * ldy + c, a[o][0]);
      StoreV(y + static_cast<size_t>(o) * ldy + c + kLanes, a[o][1]);
    }
  }
  for (; c < n; ++c) {
    for (int o = 0; o < NO; ++o) {
      float acc = 0;
      for (int i = 0; i < m; ++i) acc += h[o * m + i] * x[static_cast<size_t>(i) * ldx + c];
      y[static_cast<size_t>(o) * ldy + c] = acc;
    }
  }
}

// y_o = sum_i h[o * m + i] * x_i for o < nout (y_o = y + o * ldy), up to 4 outputs formed in
// one sweep over the m rows (more take one sweep per 4): each y_o is bit-identical to
// WeightedSum with its h. nout <= 0 writes nothing.
XHC_INLINE void WeightedSums(int n, int m, int nout, const float* __restrict h,
                             const float* __restrict x, int ldx, float* __restrict y, int ldy) {
  for (; nout > 4; nout -= 4, h += 4 * m, y += static_cast<size_t>(4) * ldy)
    WeightedSumsFixed<4>(n, m, h, x, ldx, y, ldy);
  switch (nout) {
    case 1: return WeightedSumsFixed<1>(n, m, h, x, ldx, y, ldy);
    case 2: return WeightedSumsFixed<2>(n, m, h, x, ldx, y, ldy);
    case 3: return WeightedSumsFixed<3>(n, m, h, x, ldx, y, ldy);
    case 4: return WeightedSumsFixed<4>(n, m, h, x, ldx, y, ldy);
    default: return;  // nout <= 0
  }
}

// y += sum_i h[i] * x_i (x_i = x + i * ldx), the m rows read in one sweep; the sum over i is
// formed first (in order from 0), then added to y.
XHC_INLINE void AxpyWeighted(int n, int m, const float* __restrict h, const float* __restrict x,
                             int ldx, float* __restrict y) {
  constexpr int kW = 2 * kLanes;
  int c = 0;
  for (; c + kW <= n; c += kW) {
    V16 a0 = {}, a1 = {};
    for (int i = 0; i < m; ++i) {
      const float hi = h[i];
      const float* __restrict xi = x + static_cast<size_t>(i) * ldx + c;
      a0 += hi * LoadV(xi), a1 += hi * LoadV(xi + kLanes);
    }
    a0 += LoadV(y + c), a1 += LoadV(y + c + kLanes);
    StoreV(y + c, a0), StoreV(y + c + kLanes, a1);
  }
  for (; c < n; ++c) {
    float acc = 0;
    for (int i = 0; i < m; ++i) acc += h[i] * x[static_cast<size_t>(i) * ldx + c];
    y[c] += acc;
  }
}

// Prefetches the n floats at a (and at b, interleaved line by line, unless null) into L2
// (prefetcht1), one cache line at a time. For rows requested a whole token ahead (128 KiB in
// the input pass): into L1 (prefetcht0) every request held one of L1's few miss buffers until
// its line arrived and the prefetch loops stalled on them (perf: 40% of TokenWriteInputGrad's
// samples); into L2, and the two rows' lines interleaved, the pass took 3% less
// (docs/design/fused-xhc-sublayer.md).
XHC_INLINE void PrefetchL2(int n, const float* a, const float* b = nullptr) {
  for (int c = 0; c < n; c += 16) {
    __builtin_prefetch(a + c, 0, 2);
    if (b) __builtin_prefetch(b + c, 0, 2);
  }
}

// Prefetches the n floats at p into L1, for lines about to be written. The write hint asks
// for prefetchw (fetched for ownership), but GCC emits it only for a target with PRFCHW,
// which none of the clones' targets (avx512f, avx2, default) enables: this compiles to
// prefetcht0, a read prefetch. A real prefetchw (inline asm) measured no different in XhcPost
// (docs/design/fused-xhc-sublayer.md).
XHC_INLINE void PrefetchSpanForWrite(int n, const float* p) {
  for (int c = 0; c < n; c += 16) __builtin_prefetch(p + c, 1, 3);
}

// out[c] = (accumulate ? out[c] : 0) + a_0[c] b_0[c] + ... + a_{n-1}[c] b_{n-1}[c], added in
// that order, with a_i = a + i * lda and b_i = b + i * ldb (ldb may be negative): the same
// additions as n passes of `out[c] += a_i[c] * b_i[c]`, but each 64-channel chunk of out summed
// in registers over all i instead of loaded and stored n times (the causal convolutions, n up
// to 12 taus: ConvToken -15-20%, docs/design/skinny-gemm-and-isa-dispatch.md).
XHC_INLINE void AccumulateProducts(int C, int n, const float* a, ptrdiff_t lda, const float* b,
                                   ptrdiff_t ldb, float* out, bool accumulate) {
  int c = 0;
  for (; c + 4 * kLanes <= C; c += 4 * kLanes) {
    // Four named sums, not an array (see AddScaledRows).
    V16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    if (accumulate) {
      s0 = LoadV(out + c), s1 = LoadV(out + c + kLanes);
      s2 = LoadV(out + c + 2 * kLanes), s3 = LoadV(out + c + 3 * kLanes);
    }
    for (int i = 0; i < n; ++i) {
      const float* ai = a + i * lda + c;
      const float* bi = b + i * ldb + c;
      s0 += LoadV(ai) * LoadV(bi), s1 += LoadV(ai + kLanes) * LoadV(bi + kLanes);
      s2 += LoadV(ai + 2 * kLanes) * LoadV(bi + 2 * kLanes);
      s3 += LoadV(ai + 3 * kLanes) * LoadV(bi + 3 * kLanes);
    }
    StoreV(out + c, s0), StoreV(out + c + kLanes, s1);
    StoreV(out + c + 2 * kLanes, s2), StoreV(out + c + 3 * kLanes, s3);
  }
  for (; c + kLanes <= C; c += kLanes) {
    V16 acc = accumulate ? LoadV(out + c) : V16{};
    for (int i = 0; i < n; ++i) acc += LoadV(a + i * lda + c) * LoadV(b + i * ldb + c);
    StoreV(out + c, acc);
  }
  for (; c < C; ++c) {
    float acc = accumulate ? out[c] : 0.0f;
    for (int i = 0; i < n; ++i) acc += a[i * lda + c] * b[i * ldb + c];
    out[c] = acc;
  }
}

// y += a * x
XHC_INLINE void Axpy(int n, float a, const float* __restrict x, float* __restrict y) {
  for (int c = 0; c < n; ++c) y[c] += a * x[c];
}

// y = start + h[0] * x[0] + h[1] * x[1] + ... + h[m-1] * x[m-1] (rows of n floats; start: y's
// own values when start == y, zero when null), the terms added in that order with separate
// multiply and add: bit for bit what y = start (or zeros) and then Axpy(n, h[i], x[i], y) for
// i = 0, 1, ... give, but with y's running sums in registers, loaded and stored once per 64
// floats instead of once per term. The rows must not overlap y.
XHC_INLINE void AddScaledRows(int n, int m, const float* h, const float* const* x,
                              const float* start, float* y) {
  int c = 0;
  for (; c + 4 * kLanes <= n; c += 4 * kLanes) {
    // Four named sums: as an `= {}` array GCC cleared them through memory (`rep stos`) on
    // every chunk and kept them on the stack (perf on Zen 3: 28% of TokenPost's samples on
    // that rep stos; docs/design/skinny-gemm-and-isa-dispatch.md).
    V16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    if (start) {
      s0 = LoadV(start + c), s1 = LoadV(start + c + kLanes);
      s2 = LoadV(start + c + 2 * kLanes), s3 = LoadV(start + c + 3 * kLanes);
    }
    for (int i = 0; i < m; ++i) {
      const float hi = h[i];
      const float* xi = x[i] + c;
      s0 += hi * LoadV(xi), s1 += hi * LoadV(xi + kLanes);
      s2 += hi * LoadV(xi + 2 * kLanes), s3 += hi * LoadV(xi + 3 * kLanes);
    }
    StoreV(y + c, s0), StoreV(y + c + kLanes, s1);
    StoreV(y + c + 2 * kLanes, s2), StoreV(y + c + 3 * kLanes, s3);
  }
  for (; c < n; ++c) {
    float acc = start ? start[c] : 0.0f;
    for (int i = 0; i < m; ++i) acc += h[i] * x[i][c];
    y[c] = acc;
  }
}

// Sum and sum of squares in one pass (double combine keeps var = E[x^2] - mean^2 accurate).
XHC_INLINE void SumSq(int n, const float* __restrict x, double* sum, double* sumsq) {
  float s[kLanes] = {}, q[kLanes] = {};
  int c = 0;
  {
    V16 vs = {}, vq = {};
    for (; c + kLanes <= n; c += kLanes) {
      const V16 v = LoadV(x + c);
      vs += v, vq += v * v;
    }
    StoreV(s, vs), StoreV(q, vq);
  }
  for (int l = 0; c < n; ++c, ++l) s[l] += x[c], q[l] += x[c] * x[c];
  double ts = 0, tq = 0;
  for (int l = 0; l < kLanes; ++l) ts += s[l], tq += q[l];
  *sum = ts;
  *sumsq = tq;
}

}  // namespace xhc::kernels::cpu

#endif  // XHC_KERNELS_CPU_XHC_CPU_UTIL_H_
