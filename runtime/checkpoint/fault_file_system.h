#ifndef XHC_RUNTIME_CHECKPOINT_FAULT_FILE_SYSTEM_H_
#define XHC_RUNTIME_CHECKPOINT_FAULT_FILE_SYSTEM_H_

// Test only: a FileSystem that forwards to a real one and makes chosen operations fail with
// ENOSPC, deterministically. Every create, directory creation, append, fsync, close, link
// and directory fsync is one numbered "fault point", in the order the code under test
// reaches them; FailAt(n) makes point n fail (and, when `sticky`, every later one: a disk
// that stays full). Renames and removals are never failed: they need no free blocks, and
// they are how a writer cleans up on a full disk.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/checkpoint/file_system.h"

namespace xhc {

class FaultFileSystem : public FileSystem {
 public:
  explicit FaultFileSystem(FileSystem& base) : base_(base) {}

  // Point n (0-based, counted from construction or Reset) fails; -1 fails nothing.
  void FailAt(int64_t n, bool sticky) {
    fail_at_ = n;
    sticky_ = sticky;
  }
  void Reset() {
    points_.clear();
    fail_at_ = -1;
  }
  // "append /dir/file.tmp.123", ... for every point reached so far, failed or not.
  const std::vector<std::string>& points() const { return points_; }
  int64_t num_failed() const { return num_failed_; }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  absl::Status CreateDirs(const std::string& dir) override;
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return base_.Rename(from, to);
  }
  absl::Status Link(const std::string& existing, const std::string& new_name) override;
  absl::Status RemoveAll(const std::string& path) override { return base_.RemoveAll(path); }
  bool Exists(const std::string& path) override { return base_.Exists(path); }
  absl::Status SyncDir(const std::string& dir) override;
  absl::StatusOr<uint64_t> FreeBytes(const std::string& path) override {
    return base_.FreeBytes(path);
  }

  // Records the point; ENOSPC when it is one chosen to fail. (Public for the wrapped files.)
  absl::Status Point(const std::string& what, const std::string& path);

 private:
  FileSystem& base_;
  std::vector<std::string> points_;
  int64_t fail_at_ = -1;
  bool sticky_ = false;
  int64_t num_failed_ = 0;
};

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_FAULT_FILE_SYSTEM_H_
