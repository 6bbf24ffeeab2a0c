#include "runtime/transport/file_kv_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/file_read.h"

namespace xhc {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::InternalError(
      absl::StrCat("FileKvStore: ", what, " ", path, ": ", std::strerror(errno)));
}

absl::Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("write", path);
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// nullopt-like: returns false when the file does not exist (yet).
bool ReadFile(const std::string& path, std::string* out) {
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  if (!bytes.ok()) return false;
  *out = *std::move(bytes);
  return true;
}

}  // namespace

FileKvStore::FileKvStore(std::string directory) : directory_(std::move(directory)) {}

std::string FileKvStore::PathOf(const std::string& key) const {
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      name.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&name, "%%%02x", c);
    }
  }
  return absl::StrCat(directory_, "/", name, ".kv");
}

absl::Status FileKvStore::Set(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("KvStore key must not be empty");
  static std::atomic<uint64_t> counter{0};
  const std::string path = PathOf(key);
  // Unique per process and call, so concurrent writers of one key never share a temp file.
  const std::string temp = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter.fetch_add(1));
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("open", temp);
  absl::Status status = WriteAll(fd, value, temp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError("close", temp);
  if (status.ok() && std::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoError("rename into", path);
  }
  if (!status.ok()) std::remove(temp.c_str());
  return status;
}

absl::StatusOr<std::vector<std::string>> FileKvStore::Get(const std::vector<std::string>& keys,
                                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> values(keys.size());
  std::vector<bool> have(keys.size(), false);
  absl::Duration backoff = absl::Milliseconds(1);
  while (true) {
    std::vector<std::string> missing;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!have[i]) have[i] = ReadFile(PathOf(keys[i]), &values[i]);
      if (!have[i]) missing.push_back(keys[i]);
    }
    if (missing.empty()) return values;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "FileKvStore(", directory_, "): timed out after ", absl::FormatDuration(timeout),
          " waiting for keys [", absl::StrJoin(missing, ", "), "]"));
    }
    absl::SleepFor(std::min(backoff, std::max(deadline - absl::Now(), absl::ZeroDuration())));
    backoff = std::min(backoff * 2, absl::Milliseconds(20));
  }
}

}  // namespace xhc
