// Checkpoint write throughput: one shard written the way checkpoints are (safetensors
// encoding, temporary file, fsync, rename, directory fsync) against a plain sequential write
// + fsync of the same number of bytes, in the same run; plus the in-memory snapshot copy
// that is the only stall an asynchronous checkpoint adds to a training step.
//
//   bazel run //runtime/lab/bench:checkpoint_bench -- [--config configs/quickstart.yaml] [--dir D]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/process_env.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/common/config.h"
#include "runtime/model/params.h"
#include "runtime/train/model_io.h"

namespace xhc {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double PlainWrite(const std::string& path, const std::vector<char>& bytes) {
  const auto t0 = Clock::now();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  fsync(fd);
  close(fd);
  return Since(t0);
}

int Main(const std::string& config_path, const std::string& dir) {
  absl::StatusOr<Config> config = LoadConfigFile(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 2;
  }
  const auto spec = model::StageSpec::Full(config->model);
  model::ParamSetT<float> params = model::BuildStageParams<float>(config->model, spec);
  model::InitParams(config->model, 1, &params);
  std::filesystem::create_directories(dir);
  double best_snapshot = 1e9, best_shard = 1e9, best_plain = 1e9;
  int64_t bytes = 0;
  for (int rep = 0; rep < 3; ++rep) {
    std::vector<float> zeros;
    const auto t0 = Clock::now();
    std::vector<std::vector<float>> copies;
    for (const TensorView& v : train::ParamViews(params, true, &zeros)) {
      copies.emplace_back(v.data, v.data + NumElements(v.shape));
    }
    best_snapshot = std::min(best_snapshot, Since(t0));
    const auto t1 = Clock::now();
    absl::StatusOr<ShardRecord> rec =
        WriteShard(dir + "/step", "bench.safetensors", train::ParamViews(params, true, &zeros));
    best_shard = std::min(best_shard, Since(t1));
    if (!rec.ok()) {
      std::fprintf(stderr, "%s\n", rec.status().ToString().c_str());
      return 1;
    }
    bytes = rec->bytes;
    best_plain = std::min(best_plain, PlainWrite(dir + "/plain.bin", std::vector<char>(bytes, 1)));
  }
  std::printf(
      "{\"bytes\": %lld, \"snapshot_ms\": %.2f, \"shard_write_s\": %.4f, "
      "\"shard_mb_per_s\": %.1f, \"plain_write_s\": %.4f, \"plain_mb_per_s\": %.1f, "
      "\"shard_vs_plain\": %.3f}\n",
      static_cast<long long>(bytes), best_snapshot * 1e3, best_shard, bytes / 1e6 / best_shard,
      best_plain, bytes / 1e6 / best_plain, best_plain / best_shard);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace xhc

int main(int argc, char** argv) {
  xhc::MaybeReexecWithTunedEnv(argv);
  xhc::KeepFreedMemoryInProcess();
  std::string config = "configs/quickstart.yaml", dir = "/tmp/xhc-checkpoint-bench";
  if (const char* d = std::getenv("BUILD_WORKING_DIRECTORY"); d != nullptr) chdir(d);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--config")) config = argv[i + 1];
    if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  return xhc::Main(config, dir);
}
