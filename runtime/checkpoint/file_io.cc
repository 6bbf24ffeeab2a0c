#include "runtime/checkpoint/file_io.h"

#include <unistd.h>
#include <xxhash.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xhc {

absl::Status WithFreeSpace(absl::Status status, FileSystem& fs, const std::string& dir) {
  if (!absl::IsResourceExhausted(status)) return status;
  // A directory that could not be created has no filesystem yet: ask its nearest ancestor.
  std::string holder = dir;
  while (!fs.Exists(holder) && std::filesystem::path(holder).has_parent_path() &&
         std::filesystem::path(holder).parent_path() != holder) {
    holder = std::filesystem::path(holder).parent_path().string();
  }
  absl::StatusOr<uint64_t> free = fs.FreeBytes(holder);
  const std::string space =
      free.ok() ? absl::StrFormat("%.1f MiB (%d bytes) free", *free / 1048576.0, *free)
                : absl::StrCat("free space unknown (", free.status().message(), ")");
  return absl::ResourceExhaustedError(
      absl::StrCat(status.message(), "; ", space, " on the filesystem holding ", holder));
}

absl::Status SyncDir(const std::string& dir) { return DefaultFileSystem().SyncDir(dir); }

absl::Status WriteFileAtomic(const std::string& path, const std::string& bytes, FileSystem& fs) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  absl::StatusOr<std::unique_ptr<WritableFile>> file = fs.NewWritableFile(tmp);
  if (!file.ok()) {
    fs.RemoveAll(tmp).IgnoreError();  // a failed create may still have made the entry
    return WithFreeSpace(file.status(), fs, dir);
  }
  absl::Status s = (*file)->Append(bytes);
  if (s.ok()) s = (*file)->Sync();
  absl::Status closed = (*file)->Close();
  if (s.ok()) s = closed;
  if (s.ok()) s = fs.Rename(tmp, path);
  if (!s.ok()) {
    // Nothing half-written stays behind: `path` still holds its old content (or nothing).
    fs.RemoveAll(tmp).IgnoreError();
    return WithFreeSpace(s, fs, dir);
  }
  return WithFreeSpace(fs.SyncDir(dir), fs, dir);
}

std::string XxHash64Hex(const std::string& bytes) {
  return absl::StrFormat("%016x", XXH64(bytes.data(), bytes.size(), 0));
}

}  // namespace xhc
