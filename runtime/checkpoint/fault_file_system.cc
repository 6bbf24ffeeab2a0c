#include "runtime/checkpoint/fault_file_system.h"

#include <cerrno>

namespace xhc {
namespace {

class FaultWritableFile : public WritableFile {
 public:
  FaultWritableFile(FaultFileSystem* fs, std::unique_ptr<WritableFile> base, std::string path)
      : fs_(fs), base_(std::move(base)), path_(std::move(path)) {}

  // A failed append writes nothing: the point is reached before the real write.
  absl::Status Append(absl::string_view data) override {
    absl::Status s = fs_->Point("append", path_);
    return s.ok() ? base_->Append(data) : s;
  }
  absl::Status Sync() override {
    absl::Status s = fs_->Point("fsync", path_);
    return s.ok() ? base_->Sync() : s;
  }
  // The real file is closed either way (no descriptor leaks); the injected error wins.
  absl::Status Close() override {
    absl::Status s = fs_->Point("close", path_);
    absl::Status real = base_->Close();
    return s.ok() ? real : s;
  }

 private:
  FaultFileSystem* fs_;
  std::unique_ptr<WritableFile> base_;
  std::string path_;
};

}  // namespace

absl::Status FaultFileSystem::Point(const std::string& what, const std::string& path) {
  const int64_t n = static_cast<int64_t>(points_.size());
  points_.push_back(what + " " + path);
  if (fail_at_ >= 0 && (n == fail_at_ || (sticky_ && n > fail_at_))) {
    ++num_failed_;
    return ErrnoStatus(ENOSPC, what, path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WritableFile>> FaultFileSystem::NewWritableFile(
    const std::string& path) {
  absl::Status s = Point("create", path);
  if (!s.ok()) return s;
  absl::StatusOr<std::unique_ptr<WritableFile>> file = base_.NewWritableFile(path);
  if (!file.ok()) return file.status();
  return std::make_unique<FaultWritableFile>(this, std::move(*file), path);
}

absl::Status FaultFileSystem::CreateDirs(const std::string& dir) {
  absl::Status s = Point("mkdir", dir);
  return s.ok() ? base_.CreateDirs(dir) : s;
}

absl::Status FaultFileSystem::Link(const std::string& existing, const std::string& new_name) {
  absl::Status s = Point("link", new_name);
  return s.ok() ? base_.Link(existing, new_name) : s;
}

absl::Status FaultFileSystem::SyncDir(const std::string& dir) {
  absl::Status s = Point("fsync-dir", dir);
  return s.ok() ? base_.SyncDir(dir) : s;
}

}  // namespace xhc
