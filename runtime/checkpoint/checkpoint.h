#ifndef XHC_RUNTIME_CHECKPOINT_CHECKPOINT_H_
#define XHC_RUNTIME_CHECKPOINT_CHECKPOINT_H_

// Checkpoint directories (format in FORMAT.md beside this file):
//   ROOT/step-000120/{<shard>.safetensors..., MANIFEST.json}
//   ROOT/LATEST            "step-000120\n"
// Shards are written first (each atomically and durably), the manifest last; a step
// directory without a manifest is an unfinished write and is never loaded. LATEST moves only
// after the manifest is durable. Loading verifies every shard's size and xxhash64, then
// every tensor's name and shape, before handing anything back: never half a checkpoint.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/checkpoint/file_system.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/step_names.h"

namespace xhc {

inline constexpr int kCheckpointFormatVersion = 1;

struct ShardRecord {
  std::string file;  // relative to the step directory
  int64_t bytes = 0;
  std::string xxhash64;  // 16 hex digits
  std::vector<std::string> tensors;
};

struct Manifest {
  int format_version = kCheckpointFormatVersion;
  int64_t step = 0;                        // optimizer steps completed
  std::string config_yaml;                 // the full job config
  int64_t sampler_step = 0;                // next training step the sampler serves
  std::map<std::string, std::string> rng;  // named RNG states (decimal/hex strings)
  std::vector<ShardRecord> shards;
  std::string layout;  // who wrote it, e.g. "single-process", "4 ranks dualpipev"
};

// Writes one shard (safetensors, atomic + fsync) into `step_dir` (created if needed). On a
// failure the shard's temporary file is gone; the caller abandons the step
// (AbandonCheckpoint). A full disk is kResourceExhausted naming the file and the free space.
absl::StatusOr<ShardRecord> WriteShard(const std::string& step_dir, const std::string& file,
                                       const std::vector<TensorView>& tensors,
                                       FileSystem& files = DefaultFileSystem());

// Writes MANIFEST.json for `manifest.step` under `root`, then moves LATEST to it, then
// deletes committed steps older than the newest `keep` (and stale unfinished ones). On any
// failure (a full disk at any write or fsync) the step is not committed: its directory is
// removed, LATEST is put back to the step it named before (or removed if there was none),
// and the error says so; nothing else under `root` changes.
absl::Status CommitCheckpoint(const std::string& root, const Manifest& manifest, int keep,
                              FileSystem& files = DefaultFileSystem());

// Removes the unfinished directory of `step` under `root` (after a failed shard write or
// commit), unless LATEST names it. Removals need no free space, so this works on a full disk.
absl::Status AbandonCheckpoint(const std::string& root, int64_t step,
                               FileSystem& files = DefaultFileSystem());

struct LoadedCheckpoint {
  std::string dir;
  Manifest manifest;
  std::map<std::string, Tensor> tensors;  // every tensor of every shard, by global name
};

// Loads and fully verifies one step directory. kDataLoss for a missing/short/corrupt shard
// or manifest, naming the file.
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& step_dir);

// Checks sizes and checksums only (no decode); used by `xhc ckpt verify`.
absl::StatusOr<Manifest> VerifyCheckpoint(const std::string& step_dir);

// The directory LATEST points to (kNotFound when there is none).
absl::StatusOr<std::string> LatestStepDir(const std::string& root);

// Committed step directories under root, newest first.
std::vector<std::string> CommittedStepDirs(const std::string& root);

// Loads LATEST; when it fails verification, falls back to older committed steps, reporting
// each skipped one in `*warnings`. kNotFound/kDataLoss when nothing loads.
absl::StatusOr<LoadedCheckpoint> LoadNewestValid(const std::string& root,
                                                 std::vector<std::string>* warnings);

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_CHECKPOINT_H_
