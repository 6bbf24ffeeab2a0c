#include "runtime/control/cli/cli_util.h"

#include <cstdio>
#include <ctime>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace xhc::cli {
namespace fs = std::filesystem;

absl::StatusOr<Flags> ParseFlagsOrHelp(const std::string& command, const std::string& synopsis,
                                       const std::vector<std::string>& args,
                                       std::vector<FlagSpec> specs) {
  specs.push_back({"help", "show this help", true, false});
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") {
      std::printf("usage: xhc %s %s\n\n%s", command.c_str(), synopsis.c_str(),
                  FlagsUsage(specs).c_str());
      return absl::CancelledError("help");
    }
  }
  return Flags::Parse(args, specs);
}

std::string DefaultRunDir(const std::string& kind) {
  std::time_t now = std::time(nullptr);
  std::tm tm_buf;
  localtime_r(&now, &tm_buf);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm_buf);
  return absl::StrCat("runs/", kind, "-", stamp);
}

int Fail(const std::string& command, const absl::Status& status) {
  if (absl::IsCancelled(status)) return 0;
  std::fprintf(stderr, "xhc %s: %s\n", command.c_str(), status.ToString().c_str());
  return absl::IsInvalidArgument(status) ? 2 : 1;
}

absl::StatusOr<std::string> ResolveCheckpointDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  if (fs::exists(fs::path(dir) / "MANIFEST.json", ec)) return dir;
  if (fs::exists(fs::path(dir) / "LATEST", ec)) return LatestStepDir(dir);
  if (fs::exists(fs::path(dir) / "checkpoints" / "LATEST", ec)) {
    return LatestStepDir((fs::path(dir) / "checkpoints").string());
  }
  return absl::NotFoundError(
      absl::StrCat(dir, ": not a checkpoint (no MANIFEST.json, LATEST or checkpoints/LATEST)"));
}

}  // namespace xhc::cli
