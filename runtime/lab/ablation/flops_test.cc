#include "runtime/lab/ablation/flops.h"

#include "gtest/gtest.h"

namespace xhc::ablation {
namespace {

ModelConfig Tiny(const std::string& residual) {
  auto c = ParseConfig(
      "model: {vocab_size: 256, d_model: 16, n_layers: 1, n_heads: 2, n_kv_heads: 1, "
      "d_ff: 64, seq_len: 4, residual: " +
      residual + "}\n");
  EXPECT_TRUE(c.ok()) << c.status();
  return c->model;
}

// Hand count, C = 16, H = 2, Hkv = 1, dh = 8, T = 4, d_ff = 64, V = 256, one layer:
// attention 2·16·(2+2)·8 + 2·2·8·16 + 4·2·8·(4+1)/2 = 1024 + 512 + 160 = 1696,
// MLP 6·16·64 = 6144, LM head 2·16·256 = 8192: backbone 16032.
TEST(FlopsTest, VanillaHandCount) {
  const FlopCount f = FlopsPerToken(Tiny("{type: vanilla}"));
  EXPECT_DOUBLE_EQ(f.backbone, 16032);
  EXPECT_DOUBLE_EQ(f.residual, 2 * 16);  // one add per channel per sublayer
  EXPECT_DOUBLE_EQ(f.training(), 3 * (16032 + 32));
}

// mhc N = 2 (k = 2), no kernels, 20 Sinkhorn iterations, per sublayer: read map 2·2·32 = 128,
// dense read 2·2·16 = 64, res 2·4·32 = 256, Sinkhorn 20·2·4 = 160, mix 2·4·16 = 128,
// post 2·2·32 = 128, write 2·2·16 = 64: 928; two sublayers 1856; head reduce 2·2·32 + 2·2·16
// = 192: 2048.
TEST(FlopsTest, MhcHandCount) {
  const FlopCount f = FlopsPerToken(Tiny("{type: mhc, n_streams: 2}"));
  EXPECT_DOUBLE_EQ(f.backbone, 16032);
  EXPECT_DOUBLE_EQ(f.residual, 2048);
}

// hc N = 2, per sublayer 2NC + 2NC + 2N²C + 2NC + 2N²C + 2NC = 4·64 + 2·128 = 512; two: 1024;
// head 192.
TEST(FlopsTest, HcHandCount) {
  EXPECT_DOUBLE_EQ(FlopsPerToken(Tiny("{type: hc, n_streams: 2}")).residual, 1024 + 192);
}

// The MLP side of mhc + conv adds K = 2 (one kernel of width 4): post 2·(2·2)·32 = 256 instead
// of 128, write 2·2·2·16 = 128 instead of 64, the convolution 2·4·16 = 128 and Gram–Schmidt
// 4·16·1 = 64: +128 + 64 + 128 + 64 = +384.
TEST(FlopsTest, ConvolutionsOnTheMlpSide) {
  EXPECT_DOUBLE_EQ(FlopsPerToken(Tiny("{type: mhc, n_streams: 2, conv_kernels: [4]}")).residual,
                   2048 + 384);
}

// xhc_flash window 2 on one layer: the router only at the entry and res / mix only at the
// exit, so it costs the same as xhc minus one router, one res map, one Sinkhorn and one mix.
TEST(FlopsTest, FlashSharesTheRouterAndMixesOnce) {
  const std::string common = "n_streams: 4, n_active: 2, n_fixed: 1, conv_kernels: []";
  const double x = FlopsPerToken(Tiny("{type: xhc, " + common + "}")).residual;
  const double f = FlopsPerToken(Tiny("{type: xhc_flash, window: 2, " + common + "}")).residual;
  const double C = 16, N = 4, k = 2;
  EXPECT_DOUBLE_EQ(x - f, 2 * N * N * C + 2 * k * k * k * C + 20 * 2 * k * k + 2 * k * k * C);
}

}  // namespace
}  // namespace xhc::ablation
