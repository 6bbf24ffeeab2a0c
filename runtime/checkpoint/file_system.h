#ifndef XHC_RUNTIME_CHECKPOINT_FILE_SYSTEM_H_
#define XHC_RUNTIME_CHECKPOINT_FILE_SYSTEM_H_

// The filesystem seam under checkpoint writing (leveldb's Env): every operation that can
// fail on a full or broken disk goes through it, so tests inject a failure at each point
// (fault_file_system.h) instead of filling a real disk. Contract for every method: no
// exceptions; an error Status names the path and the OS's reason; a failure with errno
// ENOSPC or EDQUOT is kResourceExhausted, any other I/O failure kInternal.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xhc {

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  // Appends all of `data` (short writes are retried) or fails.
  virtual absl::Status Append(absl::string_view data) = 0;
  // fsync: the bytes appended so far are durable when it returns OK.
  virtual absl::Status Sync() = 0;
  // Closes the file; called once. Errors from close (deferred write-back) are reported.
  virtual absl::Status Close() = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates or truncates `path` for writing (mode 0644).
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  // Creates `dir` and its missing parents (OK when it already exists).
  virtual absl::Status CreateDirs(const std::string& dir) = 0;
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  // A second name for an existing file (link(2)): a way back that costs no data blocks.
  virtual absl::Status Link(const std::string& existing, const std::string& new_name) = 0;
  // Removes a file, or a directory and everything in it; OK when `path` does not exist.
  virtual absl::Status RemoveAll(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  // fsyncs a directory (after creating, renaming or removing entries in it).
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // Bytes available to this user on the filesystem holding `path` (statvfs f_bavail).
  virtual absl::StatusOr<uint64_t> FreeBytes(const std::string& path) = 0;
};

// The real (POSIX) filesystem; lives for the whole process.
FileSystem& DefaultFileSystem();

// kResourceExhausted for ENOSPC / EDQUOT, kInternal otherwise: "<what> <path>: <strerror>".
absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path);

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_FILE_SYSTEM_H_
