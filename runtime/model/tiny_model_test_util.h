#ifndef XHC_RUNTIME_MODEL_TINY_MODEL_TEST_UTIL_H_
#define XHC_RUNTIME_MODEL_TINY_MODEL_TEST_UTIL_H_

// The tiny model the model-level tests run in every residual variant (testonly).

#include <vector>

#include "gtest/gtest.h"
#include "runtime/common/config.h"

namespace xhc::model {

// One residual variant of the tiny model.
struct Variant {
  const char* name;
  ResidualType type;
  int n_streams;
  std::vector<int> conv_kernels;
  int window = 2;
};

// Every residual variant, for tests parameterised over them (gtest's ValuesIn).
inline std::vector<Variant> AllVariants() {
  return {Variant{"vanilla", ResidualType::kVanilla, 1, {}},
          Variant{"hc", ResidualType::kHc, 3, {}},
          Variant{"mhc", ResidualType::kMhc, 3, {}},
          Variant{"mhc_conv", ResidualType::kMhc, 3, {2, 3}},
          Variant{"xhc", ResidualType::kXhc, 6, {2, 3}},
          Variant{"xhc_flash2", ResidualType::kXhcFlash, 6, {2, 3}, 2},
          Variant{"xhc_flash4", ResidualType::kXhcFlash, 6, {2, 3}, 4}};
}

// d_model 8, 2 heads (1 KV head), d_ff 12, 5 tokens, vocabulary 11; k = 3 active streams
// (1 fixed), 4 Sinkhorn iterations. Fails the calling test if the result does not validate.
inline ModelConfig Tiny(const Variant& v, int n_layers = 2) {
  ModelConfig c;
  c.vocab_size = 11;
  c.d_model = 8;
  c.n_layers = n_layers;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.d_ff = 12;
  c.seq_len = 5;
  c.residual.type = v.type;
  c.residual.n_streams = v.n_streams;
  c.residual.n_active = 3;
  c.residual.n_fixed = 1;
  c.residual.conv_kernels = v.conv_kernels;
  c.residual.sinkhorn_iters = 4;
  c.residual.window = v.window;
  absl::Status s = ValidateModel(c);
  EXPECT_TRUE(s.ok()) << s;
  return c;
}

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_TINY_MODEL_TEST_UTIL_H_
