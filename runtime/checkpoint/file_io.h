#ifndef XHC_RUNTIME_CHECKPOINT_FILE_IO_H_
#define XHC_RUNTIME_CHECKPOINT_FILE_IO_H_

// Durable file operations: a file is written under a temporary name, fsynced, renamed over
// its final name, and the directory is fsynced, so a crash leaves either the old file or the
// new one, never a torn one.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/checkpoint/file_system.h"

namespace xhc {

// Writes `bytes` to `path` atomically and durably (temp + fsync + rename + dir fsync). A
// failure before the rename removes the temporary file and leaves `path` as it was; only a
// failed directory fsync comes after the rename (the new content is in place but its
// durability is not guaranteed). A full disk is kResourceExhausted naming the path and the
// free space on its filesystem.
absl::Status WriteFileAtomic(const std::string& path, const std::string& bytes,
                             FileSystem& fs = DefaultFileSystem());

// fsyncs a directory (after creating or renaming entries in it).
absl::Status SyncDir(const std::string& dir);

// xxHash64 (seed 0) of a byte string, as 16 lowercase hex digits.
std::string XxHash64Hex(const std::string& bytes);

// For a kResourceExhausted `status`: the same status with the free space of the filesystem
// holding `dir` (or its nearest existing ancestor) appended ("; 1.2 MiB (1258291 bytes) free on
// the filesystem holding DIR"); other statuses unchanged.
absl::Status WithFreeSpace(absl::Status status, FileSystem& fs, const std::string& dir);

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_FILE_IO_H_
