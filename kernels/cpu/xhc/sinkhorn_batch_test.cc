// sinkhorn_batch.h against sinkhorn.h: every lane of the 8-token Sinkhorn forward and backward
// is the scalar float version's result bit for bit, for k = 1..16, iteration counts 0, 1, 3
// and the default 20, with logits drawn so that maxima tie (the backward's argmax) and lanes
// differ. Run through target_clones like the kernels, so the AVX2 / AVX-512 versions the
// kernels use on this CPU are the ones checked.

#include "kernels/cpu/xhc/sinkhorn_batch.h"

#include <cstring>
#include <random>
#include <vector>

#include "base/test_seed.h"
#include "gtest/gtest.h"
#include "kernels/cpu/xhc/sinkhorn.h"
#include "kernels/cpu/xhc/skinny_gemm.h"

namespace xhc::kernels {
namespace {

XHC_CLONES void Forward8(int k, int iters, const float* z, float* h) {
  std::vector<cpu::V8, cpu::CacheLineAllocator<cpu::V8>> m(k * k);
  cpu::SinkhornForward8(k, iters, z, h, m.data());
}

XHC_CLONES void Backward8(int k, int iters, const float* z, const float* dh, float* dz) {
  std::vector<cpu::V8, cpu::CacheLineAllocator<cpu::V8>> mats((2 * iters + 2) * k * k);
  cpu::SinkhornBackward8(k, iters, z, dh, dz, mats.data());
}

TEST(SinkhornBatch, EveryLaneIsTheScalarVersionBitForBit) {
  const uint64_t seed = xhc::testing::TestSeed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  constexpr int L = cpu::kSinkLanes;
  for (int k : {1, 2, 3, 4, 7, 16}) {
    for (int iters : {0, 1, 3, 20}) {
      const int kk = k * k;
      std::vector<float> z(L * kk), dh(L * kk), h(L * kk), dz(L * kk);
      for (int l = 0; l < L; ++l) {
        const float scale = 0.1f + l;  // lanes of very different spread
        for (int q = 0; q < kk; ++q) z[l * kk + q] = scale * nd(rng);
        if (kk > 2 && l % 2 == 1) z[l * kk + kk - 1] = z[l * kk + 1] = 5.0f * scale;  // tied max
        for (int q = 0; q < kk; ++q) {
          dh[l * kk + q] = nd(rng);
          dz[l * kk + q] = l % 3 == 0 ? 0.0f : nd(rng);  // dz is added to
        }
      }
      std::vector<float> dz_batch = dz;
      Forward8(k, iters, z.data(), h.data());
      Backward8(k, iters, z.data(), dh.data(), dz_batch.data());
      for (int l = 0; l < L; ++l) {
        std::vector<float> h1(kk), dz1(dz.begin() + l * kk, dz.begin() + (l + 1) * kk), work;
        SinkhornForward<float>(k, iters, z.data() + l * kk, h1.data());
        SinkhornBackward<float>(k, iters, z.data() + l * kk, dh.data() + l * kk, dz1.data(), work);
        ASSERT_EQ(0, std::memcmp(h1.data(), h.data() + l * kk, sizeof(float) * kk))
            << "forward, k=" << k << " iters=" << iters << " lane " << l;
        ASSERT_EQ(0, std::memcmp(dz1.data(), dz_batch.data() + l * kk, sizeof(float) * kk))
            << "backward, k=" << k << " iters=" << iters << " lane " << l;
      }
    }
  }
}

}  // namespace
}  // namespace xhc::kernels
