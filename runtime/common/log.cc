#include "runtime/common/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace xhc {
namespace {

std::mutex& LogMutex() {
  static std::mutex mu;
  return mu;
}

std::string& Tag() {
  static std::string tag;
  return tag;
}

}  // namespace

void SetLogTag(const std::string& tag) {
  std::lock_guard<std::mutex> lock(LogMutex());
  Tag() = tag;
}

void LogLine(LogLevel level, const std::string& message) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const int millis = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm_buf;
  localtime_r(&secs, &tm_buf);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm_buf);
  const char* letter = level == LogLevel::kInfo ? "I" : level == LogLevel::kWarning ? "W" : "E";
  std::lock_guard<std::mutex> lock(LogMutex());
  if (Tag().empty()) {
    std::fprintf(stderr, "%s %s.%03d %s\n", letter, stamp, millis, message.c_str());
  } else {
    std::fprintf(stderr, "%s %s.%03d [%s] %s\n", letter, stamp, millis, Tag().c_str(),
                 message.c_str());
  }
  std::fflush(stderr);
}

}  // namespace xhc
