#include "runtime/checkpoint/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/checkpoint/manifest_json.h"
#include "runtime/checkpoint/step_names.h"

namespace xhc {
namespace fs = std::filesystem;
namespace {

constexpr char kManifest[] = "MANIFEST.json";
constexpr char kLatest[] = "LATEST";

absl::StatusOr<std::string> ReadVerifiedShard(const std::string& step_dir, const ShardRecord& s) {
  const std::string path = (fs::path(step_dir) / s.file).string();
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return absl::DataLossError(absl::StrCat(path, ": shard missing"));
  if (static_cast<int64_t>(bytes->size()) != s.bytes) {
    return absl::DataLossError(absl::StrFormat("%s: size %d, manifest says %d (truncated?)", path,
                                               bytes->size(), s.bytes));
  }
  const std::string sum = XxHash64Hex(*bytes);
  if (sum != s.xxhash64) {
    return absl::DataLossError(
        absl::StrCat(path, ": xxhash64 ", sum, " != manifest ", s.xxhash64, " (corrupted)"));
  }
  return bytes;
}

absl::StatusOr<Manifest> ReadManifest(const std::string& step_dir) {
  const std::string path = (fs::path(step_dir) / kManifest).string();
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": manifest missing (unfinished checkpoint)"));
  }
  return DecodeManifest(*text, path);
}

void Prune(const std::string& root, int64_t newest_step, int keep) {
  std::vector<std::string> committed = CommittedStepDirs(root);
  for (size_t i = static_cast<size_t>(keep); i < committed.size(); ++i) {
    std::error_code ec;
    fs::remove_all(committed[i], ec);
  }
  // Unfinished older steps (no manifest) can never become valid: remove them too.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const int64_t step = StepOfDirName(entry.path().filename().string());
    if (step >= 0 && step < newest_step && !fs::exists(entry.path() / kManifest)) {
      fs::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace

absl::StatusOr<ShardRecord> WriteShard(const std::string& step_dir, const std::string& file,
                                       const std::vector<TensorView>& tensors, FileSystem& files) {
  RETURN_IF_ERROR(WithFreeSpace(files.CreateDirs(step_dir), files, step_dir));
  const std::string bytes = EncodeSafetensors(tensors, {{"format", "pt"}});
  RETURN_IF_ERROR(WriteFileAtomic((fs::path(step_dir) / file).string(), bytes, files));
  ShardRecord record;
  record.file = file;
  record.bytes = static_cast<int64_t>(bytes.size());
  record.xxhash64 = XxHash64Hex(bytes);
  for (const TensorView& t : tensors) record.tensors.push_back(t.name);
  std::sort(record.tensors.begin(), record.tensors.end());
  return record;
}

absl::Status AbandonCheckpoint(const std::string& root, int64_t step, FileSystem& files) {
  const std::string name = StepDirName(step);
  absl::StatusOr<std::string> latest = LatestStepDir(root);
  if (latest.ok() && fs::path(*latest).filename() == name) {
    return absl::FailedPreconditionError(
        absl::StrCat(root, ": not abandoning ", name, ", LATEST names it"));
  }
  return files.RemoveAll((fs::path(root) / name).string());
}

namespace {

// Moves LATEST to `name`. LATEST keeps a second name, LATEST.prev, while it is replaced, so a
// failure after the rename (the directory fsync) can still put the old pointer back.
absl::Status MoveLatest(const std::string& root, const std::string& name, FileSystem& files) {
  const std::string latest = (fs::path(root) / kLatest).string();
  const std::string prev = latest + ".prev";
  RETURN_IF_ERROR(files.RemoveAll(prev));  // left by a crash during an earlier commit
  const bool had_latest = files.Exists(latest);
  if (had_latest) RETURN_IF_ERROR(WithFreeSpace(files.Link(latest, prev), files, root));
  absl::Status s = WriteFileAtomic(latest, name + "\n", files);
  if (s.ok()) {
    files.RemoveAll(prev).IgnoreError();
    return s;
  }
  absl::Status restored = had_latest ? files.Rename(prev, latest) : files.RemoveAll(latest);
  // rename(2) of two links to one file does nothing: then the old LATEST never moved.
  files.RemoveAll(prev).IgnoreError();
  if (!restored.ok()) {
    return absl::DataLossError(
        absl::StrCat(s.message(), "; and restoring ", latest, " failed: ", restored.message()));
  }
  return s;
}

}  // namespace

absl::Status CommitCheckpoint(const std::string& root, const Manifest& manifest, int keep,
                              FileSystem& files) {
  const std::string name = StepDirName(manifest.step);
  const std::string step_dir = (fs::path(root) / name).string();
  for (const ShardRecord& s : manifest.shards) {
    if (!files.Exists((fs::path(step_dir) / s.file).string())) {
      return absl::FailedPreconditionError(
          absl::StrCat("commit of ", step_dir, ": shard ", s.file, " is not durable yet"));
    }
  }
  absl::Status s =
      WriteFileAtomic((fs::path(step_dir) / kManifest).string(), EncodeManifest(manifest), files);
  if (s.ok()) s = MoveLatest(root, name, files);
  if (!s.ok()) {
    // MoveLatest put LATEST back, so the step can be removed: it was never committed.
    absl::Status removed = AbandonCheckpoint(root, manifest.step, files);
    absl::StatusOr<std::string> latest = LatestStepDir(root);
    return absl::Status(
        s.code(),
        absl::StrCat("checkpoint step ", manifest.step, " not committed (",
                     removed.ok() ? "removed " + step_dir : removed.message(), "; LATEST names ",
                     latest.ok() ? *latest : "no step", "): ", s.message()));
  }
  Prune(root, manifest.step, keep);
  return absl::OkStatus();
}

absl::StatusOr<Manifest> VerifyCheckpoint(const std::string& step_dir) {
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(step_dir));
  for (const ShardRecord& s : m.shards) {
    ASSIGN_OR_RETURN(std::string bytes, ReadVerifiedShard(step_dir, s));
    ASSIGN_OR_RETURN(SafetensorsContents c,
                     DecodeSafetensors(bytes, (fs::path(step_dir) / s.file).string()));
    for (const std::string& name : s.tensors) {
      if (!c.tensors.count(name)) {
        return absl::DataLossError(absl::StrCat(step_dir, "/", s.file, ": tensor '", name,
                                                "' listed in the manifest is missing"));
      }
    }
  }
  return m;
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(const std::string& step_dir) {
  LoadedCheckpoint out;
  out.dir = step_dir;
  ASSIGN_OR_RETURN(out.manifest, ReadManifest(step_dir));
  for (const ShardRecord& s : out.manifest.shards) {
    ASSIGN_OR_RETURN(std::string bytes, ReadVerifiedShard(step_dir, s));
    const std::string origin = (fs::path(step_dir) / s.file).string();
    ASSIGN_OR_RETURN(SafetensorsContents c, DecodeSafetensors(bytes, origin));
    for (const std::string& name : s.tensors) {
      auto it = c.tensors.find(name);
      if (it == c.tensors.end()) {
        return absl::DataLossError(absl::StrCat(origin, ": tensor '", name, "' missing"));
      }
      if (!out.tensors.emplace(name, std::move(it->second)).second) {
        return absl::DataLossError(absl::StrCat(origin, ": tensor '", name, "' in two shards"));
      }
    }
  }
  return out;
}

std::vector<std::string> CommittedStepDirs(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const int64_t step = StepOfDirName(entry.path().filename().string());
    if (step >= 0 && fs::exists(entry.path() / kManifest)) {
      found.emplace_back(step, entry.path().string());
    }
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> dirs;
  for (auto& [step, dir] : found) dirs.push_back(dir);
  return dirs;
}

absl::StatusOr<std::string> LatestStepDir(const std::string& root) {
  absl::StatusOr<std::string> text = ReadWholeFile((fs::path(root) / kLatest).string());
  if (!text.ok()) return absl::NotFoundError(absl::StrCat(root, ": no LATEST checkpoint"));
  ASSIGN_OR_RETURN(std::string name, ParseLatest(*text, (fs::path(root) / kLatest).string()));
  return (fs::path(root) / name).string();
}

absl::StatusOr<LoadedCheckpoint> LoadNewestValid(const std::string& root,
                                                 std::vector<std::string>* warnings) {
  std::vector<std::string> candidates;
  absl::StatusOr<std::string> latest = LatestStepDir(root);
  if (latest.ok()) candidates.push_back(*latest);
  for (const std::string& dir : CommittedStepDirs(root)) {
    if (std::find(candidates.begin(), candidates.end(), dir) == candidates.end()) {
      candidates.push_back(dir);
    }
  }
  if (candidates.empty()) {
    return absl::NotFoundError(absl::StrCat(root, ": no committed checkpoint"));
  }
  absl::Status last;
  for (const std::string& dir : candidates) {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadCheckpoint(dir);
    if (loaded.ok()) return loaded;
    last = loaded.status();
    if (warnings) warnings->push_back(absl::StrCat("skipping ", dir, ": ", last.message()));
  }
  return absl::DataLossError(
      absl::StrCat(root, ": no checkpoint passes verification; last error: ", last.message()));
}

}  // namespace xhc
