#ifndef XHC_RUNTIME_CHECKPOINT_FILE_IO_H_
#define XHC_RUNTIME_CHECKPOINT_FILE_IO_H_

// Durable file operations: a file is written under a temporary name, fsynced, renamed over
// its final name, and the directory is fsynced, so a crash leaves either the old file or the
// new one, never a torn one.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace xhc {

// Writes `bytes` to `path` atomically and durably (temp + fsync + rename + dir fsync).
absl::Status WriteFileAtomic(const std::string& path, const std::string& bytes);

// fsyncs a directory (after creating or renaming entries in it).
absl::Status SyncDir(const std::string& dir);

// Reads a whole file; kNotFound naming the path when it cannot be opened.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// xxHash64 (seed 0) of a byte string, as 16 lowercase hex digits.
std::string XxHash64Hex(const std::string& bytes);

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_FILE_IO_H_
