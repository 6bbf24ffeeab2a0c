#ifndef XHC_RUNTIME_CONTROL_CLI_CLI_UTIL_H_
#define XHC_RUNTIME_CONTROL_CLI_CLI_UTIL_H_

// Shared plumbing of the subcommands: flag parsing with --help, error printing, locating a
// checkpoint from a run directory / checkpoint root / step directory.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/control/cli/flags.h"

namespace xhc::cli {

// Parses flags; on --help prints usage and returns kCancelled (exit 0), on error the status.
absl::StatusOr<Flags> ParseFlagsOrHelp(const std::string& command, const std::string& synopsis,
                                       const std::vector<std::string>& args,
                                       std::vector<FlagSpec> specs);

// Prints "xhc <command>: <status>" and returns the exit code (0 for kCancelled = --help).
int Fail(const std::string& command, const absl::Status& status);

// Resolves DIR to a committed step directory: DIR itself if it holds MANIFEST.json, else the
// LATEST of DIR or of DIR/checkpoints.
absl::StatusOr<std::string> ResolveCheckpointDir(const std::string& dir);

// "runs/<kind>-YYYYmmdd-HHMMSS": where a run goes when --out is not given.
std::string DefaultRunDir(const std::string& kind);

}  // namespace xhc::cli

#endif  // XHC_RUNTIME_CONTROL_CLI_CLI_UTIL_H_
