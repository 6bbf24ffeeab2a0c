#ifndef XHC_RUNTIME_CONTROL_CLI_FLAGS_H_
#define XHC_RUNTIME_CONTROL_CLI_FLAGS_H_

// Command-line flags of one subcommand: `--name value` or `--name=value`, boolean
// `--name`. Unknown flags and missing values are errors naming the flag, and every flag a
// subcommand reads is declared, so `--help` can list them.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc {

struct FlagSpec {
  std::string name;  // without dashes
  std::string help;
  bool is_bool = false;
  bool required = false;
};

class Flags {
 public:
  // Parses args (no program or subcommand name) against `specs`.
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& fallback = "") const;
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t fallback) const;
  // A count the user gives (steps, workers, tokens): when present it must be at least `min`,
  // or the flag is refused by name; `fallback` when absent (it may be a "not given" marker).
  absl::StatusOr<int64_t> GetCount(const std::string& name, int64_t fallback,
                                   int64_t min = 1) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  bool GetBool(const std::string& name) const { return Has(name); }
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// "  --config FILE   the job config\n..." for usage messages.
std::string FlagsUsage(const std::vector<FlagSpec>& specs);

}  // namespace xhc

#endif  // XHC_RUNTIME_CONTROL_CLI_FLAGS_H_
