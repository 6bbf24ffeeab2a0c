// Host-side checks of the CUDA kernels' contracts that need no GPU, so they run wherever the
// toolkit is installed (CI included): which shapes XhcCheckShape accepts, and that
// XhcCacheCarve hands out disjoint arrays, each as large as its kernels index (the sizes
// below are derived from xhc_cuda.h's field comments, not from xhc_forward.cu), inside the
// XhcCacheBytes it promised.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/xhc_cuda.h"

namespace xhc::cuda {
namespace {

#if XHC_CUDA_ENABLED

XhcShape Mlp(int B, int T, int N, int k, int C) {
  XhcShape s;
  s.B = B, s.T = T, s.N = N, s.k = k, s.m = 2, s.C = C, s.r = 3, s.K = 4;
  s.kernels[0] = 4, s.kernels[1] = 8, s.kernels[2] = 12;
  return s;
}

TEST(XhcCheckShape, AcceptsTheModelsShapesAndRejectsWhatTheKernelsCannotHold) {
  EXPECT_EQ(XhcCheckShape(Mlp(8, 2048, 16, 4, 2048)), 0);
  XhcShape attn = Mlp(2, 9, 16, 4, 77);
  attn.r = 0, attn.K = 1;
  EXPECT_EQ(XhcCheckShape(attn), 0);
  XhcShape mhc = attn;
  mhc.N = 4, mhc.k = 4, mhc.m = 4, mhc.has_router = false;
  EXPECT_EQ(XhcCheckShape(mhc), 0);

  XhcShape wide = Mlp(1, 40, 16, 4, 64);
  wide.kernels[2] = kMaxTap;
  EXPECT_EQ(XhcCheckShape(wide), 0);
  wide.kernels[2] = kMaxTap + 1;  // the convolution walks hold at most kMaxTap taps
  EXPECT_EQ(XhcCheckShape(wide), kXhcErrInvalidArgument);
  XhcShape many = Mlp(1, 8, 32, kMaxActive + 1, 64);
  EXPECT_EQ(XhcCheckShape(many), kXhcErrInvalidArgument);
  XhcShape streams = Mlp(1, 8, kMaxStreams + 1, 4, 64);
  EXPECT_EQ(XhcCheckShape(streams), kXhcErrInvalidArgument);
  XhcShape no_router_sparse = attn;
  no_router_sparse.has_router = false;  // without a router every stream is active
  EXPECT_EQ(XhcCheckShape(no_router_sparse), kXhcErrInvalidArgument);
}

// (name, start, bytes) of every cache array, bytes as the kernels index them.
std::vector<std::pair<std::string, std::pair<uintptr_t, size_t>>> Arrays(const XhcShape& s,
                                                                         const XhcDevCache& c) {
  const size_t n = s.tokens(), N = s.N, k = s.k, C = s.C, r = s.r, K = s.K, Q = s.Q();
  size_t taps = 0;
  for (int j = 0; j < s.r; ++j) taps += s.kernels[j];
  const size_t chunks = size_t(s.B) * ((s.T + kConvChunk - 1) / kConvChunk);
  auto at = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
  const size_t f = 4, h = 2;
  return {
      {"idx", {at(c.idx), n * k * 4}},
      {"p", {at(c.p), n * k * f}},
      {"s", {at(c.s), n * N * f}},
      {"hpre", {at(c.hpre), n * N * f}},
      {"proj", {at(c.proj), n * 2 * N * f}},
      {"stats", {at(c.stats), n * 4 * f}},
      {"map_raw", {at(c.map_raw), n * Q * f}},
      {"hres", {at(c.hres), n * k * k * f}},
      {"hpost", {at(c.hpost), n * k * K * f}},
      {"wsum", {at(c.wsum), N * f}},
      {"aug", {at(c.aug), n * r * C * h}},
      {"gs", {at(c.gs), n * (r * r + r) * f}},
      {"dz_proj", {at(c.dz_proj), n * 2 * N * f}},
      {"dz_map", {at(c.dz_map), n * Q * f}},
      {"corr", {at(c.corr), n * 4 * f}},
      {"dg", {at(c.dg), n * r * C * f}},
      {"dout_f", {at(c.dout_f), n * C * f}},
      {"xa", {at(c.xa), n * k * C * h}},
      {"coef", {at(c.coef), n * std::max(2 * N, Q) * h}},
      {"wsplit", {at(c.wsplit), std::max(6 * N * N * C, 2 * Q * k * C) * h}},
      {"gemm_out", {at(c.gemm_out), n * std::max(4 * N, 2 * Q) * f}},
      {"conv_part", {at(c.conv_part), chunks * taps * C * f}},
  };
}

TEST(XhcCacheCarve, ArraysAreDisjointAlignedAndInsideTheAllocation) {
  XhcShape attn = Mlp(2, 9, 16, 4, 77);
  attn.r = 0, attn.K = 1;
  XhcShape mhc = attn;
  mhc.N = 4, mhc.k = 4, mhc.m = 4, mhc.has_router = false;
  XhcShape wide = Mlp(1, 17, 32, 8, 264);
  for (const XhcShape& s : {Mlp(2, 150, 16, 4, 40), Mlp(3, 7, 8, 4, 100), attn, mhc, wide}) {
    SCOPED_TRACE("N=" + std::to_string(s.N) + " k=" + std::to_string(s.k) + " C=" +
                 std::to_string(s.C) + " T=" + std::to_string(s.T) + " r=" + std::to_string(s.r));
    const size_t bytes = XhcCacheBytes(s);
    std::vector<char> buf(bytes + 256);
    char* base = buf.data() + (256 - reinterpret_cast<uintptr_t>(buf.data()) % 256) % 256;
    XhcDevCache c;
    ASSERT_EQ(XhcCacheCarve(s, base, &c), 0);
    auto arrays = Arrays(s, c);
    const uintptr_t lo = reinterpret_cast<uintptr_t>(base), hi = lo + bytes;
    for (const auto& [name, a] : arrays) {
      EXPECT_EQ((a.first - lo) % 256, 0u) << name;
      EXPECT_GE(a.first, lo) << name;
      EXPECT_LE(a.first + a.second, hi) << name << " ends past XhcCacheBytes";
    }
    std::sort(arrays.begin(), arrays.end(),
              [](const auto& x, const auto& y) { return x.second.first < y.second.first; });
    for (size_t i = 0; i + 1 < arrays.size(); ++i) {
      EXPECT_LE(arrays[i].second.first + arrays[i].second.second, arrays[i + 1].second.first)
          << arrays[i].first << " overlaps " << arrays[i + 1].first;
    }
  }
}

#else

TEST(XhcCheckShape, AcceptsTheModelsShapesAndRejectsWhatTheKernelsCannotHold) {
  GTEST_SKIP() << "built without the CUDA toolkit: the launch API is not compiled";
}

#endif

}  // namespace
}  // namespace xhc::cuda
