#ifndef XHC_RUNTIME_COMMON_LOG_H_
#define XHC_RUNTIME_COMMON_LOG_H_

// Minimal leveled logging to stderr with a timestamp and an optional process tag (the worker
// rank under `xhc launch`, so interleaved output from several processes stays readable).

#include <string>

#include "absl/strings/str_format.h"

namespace xhc {

enum class LogLevel { kInfo, kWarning, kError };

// Sets the tag printed in front of every line ("rank 2"); empty by default.
void SetLogTag(const std::string& tag);

void LogLine(LogLevel level, const std::string& message);

template <typename... Args>
void LogInfo(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(LogLevel::kInfo, absl::StrFormat(format, args...));
}

template <typename... Args>
void LogWarning(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(LogLevel::kWarning, absl::StrFormat(format, args...));
}

template <typename... Args>
void LogError(const absl::FormatSpec<Args...>& format, const Args&... args) {
  LogLine(LogLevel::kError, absl::StrFormat(format, args...));
}

}  // namespace xhc

#endif  // XHC_RUNTIME_COMMON_LOG_H_
