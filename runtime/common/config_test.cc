#include "runtime/common/config.h"

#include <string>

#include "gtest/gtest.h"

namespace xhc {
namespace {

// Expects ParseConfig(yaml) to fail with kInvalidArgument mentioning `key`.
void ExpectRejected(const std::string& yaml, const std::string& key) {
  absl::StatusOr<Config> c = ParseConfig(yaml);
  ASSERT_FALSE(c.ok()) << "accepted: " << yaml;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(c.status().message()).find(key), std::string::npos)
      << "message '" << c.status().message() << "' does not name " << key;
}

TEST(Config, DefaultsFollowTheSpec) {
  absl::StatusOr<Config> c = ParseConfig("model: {d_model: 64, n_heads: 4}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.vocab_size, 256);
  EXPECT_EQ(c->model.d_ff, 256);  // 4·C rounded up to 64
  EXPECT_EQ(c->model.residual.type, ResidualType::kXhc);
  EXPECT_EQ(c->model.residual.n_streams, 16);
  EXPECT_EQ(c->model.residual.n_active, 4);
  EXPECT_EQ(c->model.residual.n_fixed, 2);
  EXPECT_EQ(c->model.residual.conv_kernels, (std::vector<int>{4, 8, 12}));
  EXPECT_EQ(c->model.residual.sinkhorn_iters, 20);
}

TEST(Config, ResidualTypesResolveStreams) {
  absl::StatusOr<Config> mhc = ParseConfig("model: {residual: {type: mhc}}\n");
  ASSERT_TRUE(mhc.ok()) << mhc.status();
  EXPECT_EQ(mhc->model.residual.n_streams, 4);
  absl::StatusOr<Config> vanilla = ParseConfig("model: {residual: {type: vanilla}}\n");
  ASSERT_TRUE(vanilla.ok()) << vanilla.status();
  EXPECT_EQ(vanilla->model.residual.n_streams, 1);
}

TEST(Config, ResidualVariantsTakeTheirOwnDefaults) {
  absl::StatusOr<Config> hc = ParseConfig("model: {residual: {type: hc}}\n");
  ASSERT_TRUE(hc.ok()) << hc.status();
  EXPECT_EQ(hc->model.residual.n_streams, 4);
  EXPECT_TRUE(hc->model.residual.conv_kernels.empty());
  absl::StatusOr<Config> mhc = ParseConfig("model: {residual: {type: mhc}}\n");
  ASSERT_TRUE(mhc.ok()) << mhc.status();
  EXPECT_TRUE(mhc->model.residual.conv_kernels.empty());  // mhc: no convolutions by default
  absl::StatusOr<Config> mhc_conv =
      ParseConfig("model: {residual: {type: mhc, conv_kernels: [4, 8, 12]}}\n");
  ASSERT_TRUE(mhc_conv.ok()) << mhc_conv.status();
  EXPECT_EQ(mhc_conv->model.residual.conv_kernels, (std::vector<int>{4, 8, 12}));
  absl::StatusOr<Config> flash = ParseConfig("model: {residual: {type: xhc_flash}}\n");
  ASSERT_TRUE(flash.ok()) << flash.status();
  EXPECT_EQ(flash->model.residual.n_streams, 16);
  EXPECT_EQ(flash->model.residual.window, 2);
  EXPECT_EQ(flash->model.residual.conv_kernels, (std::vector<int>{4, 8, 12}));
  absl::StatusOr<Config> flash4 =
      ParseConfig("model: {n_layers: 4, residual: {type: xhc_flash, window: 4}}\n");
  ASSERT_TRUE(flash4.ok()) << flash4.status();
  EXPECT_EQ(flash4->model.residual.window, 4);
  // The window is part of the model: it changes the canonical YAML and the hash.
  absl::StatusOr<ModelConfig> back = ParseModelOnly(ModelConfigToYaml(flash4->model));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->residual.window, 4);
  EXPECT_NE(ModelConfigHash(flash->model), ModelConfigHash(flash4->model));
}

TEST(Config, BadResidualVariantsNameTheKey) {
  ExpectRejected("model: {residual: {type: xhc_flash, window: 3}}\n", "model.residual.window");
  ExpectRejected("model: {n_layers: 3, residual: {type: xhc_flash, window: 4}}\n",
                 "model.residual.window");
  ExpectRejected("model: {residual: {type: xhc, window: 2}}\n", "model.residual.window");
  ExpectRejected("model: {residual: {type: hc, conv_kernels: [4]}}\n",
                 "model.residual.conv_kernels");
  ExpectRejected("model: {residual: {type: mhc, n_streams: 17}}\n", "model.residual.n_streams");
  ExpectRejected("model: {residual: {type: xhc_flash, n_streams: 1}}\n",
                 "model.residual.n_streams");
}

TEST(Config, BadInputNamesTheKey) {
  ExpectRejected("model: {n_layer: 3}\n", "model.n_layer");
  ExpectRejected("modle: {}\n", "modle");
  ExpectRejected("model: {residual: {n_active: 20}}\n", "model.residual.n_active");
  ExpectRejected("model: {residual: {n_fixed: 5}}\n", "model.residual.n_fixed");
  ExpectRejected("model: {d_model: 100, n_heads: 3}\n", "model.n_heads");
  ExpectRejected("model: {n_heads: 4, n_kv_heads: 3}\n", "model.n_kv_heads");
  ExpectRejected("model: {residual: {type: xhc, n_streams: 1}}\n", "model.residual.n_streams");
  ExpectRejected("model: {residual: {type: hyper}}\n", "model.residual.type");
  ExpectRejected("model: {d_model: abc}\n", "model.d_model");
  ExpectRejected("train: {batch_size: 0}\n", "train.batch_size");
  ExpectRejected("optim: {lr: -1}\n", "optim.lr");
  ExpectRejected("pipeline: {workers: 0}\n", "pipeline.workers");
  ExpectRejected("pipeline: {data_parallel: 0}\n", "pipeline.data_parallel");
  ExpectRejected("train: {microbatches: 4}\npipeline: {data_parallel: 3}\n",
                 "pipeline.data_parallel: 3 replicas cannot split train.microbatches = 4");
  ExpectRejected("pipeline: {link: {bandwidth: fast}}\n", "pipeline.link.bandwidth");
  ExpectRejected("pipeline: {link: {bandwidth: 10kbit}}\n", "pipeline.link.bandwidth");
  ExpectRejected("pipeline: {link: {latency: 1ms}}\n", "pipeline.link.latency");
  ExpectRejected("checkpoint: {keep: 0}\n", "checkpoint.keep");
  ExpectRejected("fault: {heartbeat_timeout: 0}\n", "fault.heartbeat_timeout");
  ExpectRejected("model: [1, 2]\n", "model");
  ExpectRejected("model: {d_model: [\n", "YAML");
}

TEST(Config, DataParallelDefaultsToOneAndParses) {
  absl::StatusOr<Config> plain = ParseConfig("pipeline: {workers: 2}\n");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->pipeline.data_parallel, 1);
  absl::StatusOr<Config> dp =
      ParseConfig("train: {microbatches: 8}\npipeline: {workers: 2, data_parallel: 4}\n");
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(dp->pipeline.data_parallel, 4);
}

TEST(Config, LinkBandwidthIsUnshapedByDefaultAndParses) {
  absl::StatusOr<Config> plain = ParseConfig("pipeline: {workers: 2}\n");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->pipeline.link_bandwidth_bits_per_s, 0);
  absl::StatusOr<Config> shaped = ParseConfig("pipeline: {workers: 2, link: {bandwidth: 1gbit}}\n");
  ASSERT_TRUE(shaped.ok()) << shaped.status();
  EXPECT_EQ(shaped->pipeline.link_bandwidth_bits_per_s, 1'000'000'000);
}

TEST(Config, MissingFileIsNotFound) {
  absl::StatusOr<Config> c = LoadConfigFile("/nonexistent/x.yaml");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
}

TEST(Config, ModelYamlRoundTripsAndHashes) {
  absl::StatusOr<Config> c = ParseConfig(
      "model: {d_model: 96, n_heads: 6, n_kv_heads: 2, residual: {conv_kernels: [3, 5]}}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<ModelConfig> back = ParseModelOnly(ModelConfigToYaml(c->model));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(ModelConfigToYaml(*back), ModelConfigToYaml(c->model));
  EXPECT_EQ(ModelConfigHash(*back), ModelConfigHash(c->model));
  ModelConfig other = c->model;
  other.n_layers += 1;
  EXPECT_NE(ModelConfigHash(other), ModelConfigHash(c->model));
}

TEST(Config, ScheduleCsvExcludesABuiltInSchedule) {
  absl::StatusOr<Config> c = ParseConfig("pipeline: {schedule_csv: /tmp/s.csv, workers: 2}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pipeline.schedule_csv, "/tmp/s.csv");
  ExpectRejected("pipeline: {schedule_csv: s.csv, schedule: zbv}\n", "pipeline.schedule_csv");
  ExpectRejected("pipeline: {schedule_csv: s.csv, chunks: 2}\n", "pipeline.schedule_csv");
}

// Uneven stages: each key within [0, model.n_layers], and both together no more than that;
// unset keys stay unset (the plan then splits evenly).
TEST(Config, StageLayersAreBoundedByTheModel) {
  absl::StatusOr<Config> even = ParseConfig("model: {n_layers: 8}\n");
  ASSERT_TRUE(even.ok()) << even.status();
  EXPECT_FALSE(even->pipeline.first_stage_layers.has_value());
  EXPECT_FALSE(even->pipeline.last_stage_layers.has_value());
  absl::StatusOr<Config> c = ParseConfig(
      "model: {n_layers: 8}\npipeline: {workers: 4, first_stage_layers: 0, "
      "last_stage_layers: 8}\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pipeline.first_stage_layers, 0);
  EXPECT_EQ(c->pipeline.last_stage_layers, 8);
  ExpectRejected("model: {n_layers: 8}\npipeline: {first_stage_layers: -1}\n",
                 "pipeline.first_stage_layers: -1 must be >= 0");
  ExpectRejected("model: {n_layers: 8}\npipeline: {last_stage_layers: 9}\n",
                 "pipeline.last_stage_layers: 9 exceeds model.n_layers = 8");
  ExpectRejected("model: {n_layers: 8}\npipeline: {first_stage_layers: 5, last_stage_layers: 4}\n",
                 "pipeline.first_stage_layers + pipeline.last_stage_layers: 5 + 4 exceeds "
                 "model.n_layers = 8");
  ExpectRejected("pipeline: {first_stage_layers: two}\n", "pipeline.first_stage_layers");
  ExpectRejected("pipeline: {first_stage_layer: 1}\n", "pipeline.first_stage_layer: unknown key");
}

// Regressions (inputs in tests/fuzz/corpus/config_fuzzer/crash-*): a non-scalar key threw
// YAML::TypedBadConversion out of ParseConfig (the process ended), and 4 * d_model and
// 2 * n_layers overflowed int (UBSan). Each is now an error naming the key.
TEST(Config, HostileYamlNamesTheKeyInsteadOfCrashing) {
  ExpectRejected("model:\n  ? [a, b]\n  : 1\n", "model.?: a key must be a plain name");
  ExpectRejected("? {x: 1}\n: 2\n", "a key must be a plain name");
  ExpectRejected("model: {d_model: 1073741824, n_heads: 2, n_kv_heads: 1}\n",
                 "model.d_model: 1073741824 is not in [2, 65536]");
  ExpectRejected("model: {n_layers: 1500000000, residual: {type: xhc_flash, window: 4}}\n",
                 "model.n_layers: 1500000000 is not in [1, 4096]");
  ExpectRejected("model: {seq_len: 2147483647}\n", "model.seq_len");
  ExpectRejected("model: {vocab_size: 2147483647}\n", "model.vocab_size");
  ExpectRejected("model: {d_ff: 2147483647}\n", "model.d_ff");
  absl::StatusOr<ModelConfig> m = ParseModelOnly("model:\n  ? [a]\n  : 1\n");
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(m.status())) << m.status();
}

}  // namespace
}  // namespace xhc
