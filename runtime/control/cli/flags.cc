#include "runtime/control/cli/flags.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xhc {
namespace {

const FlagSpec* Find(const std::vector<FlagSpec>& specs, const std::string& name) {
  for (const FlagSpec& s : specs) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                                   const std::vector<FlagSpec>& specs) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--")) {
      flags.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* spec = Find(specs, name);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!spec->is_bool && !inline_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
      value = args[++i];
    }
    flags.values_[name] = spec->is_bool && !inline_value ? "true" : value;
  }
  for (const FlagSpec& s : specs) {
    if (s.required && !flags.Has(s.name)) {
      return absl::InvalidArgumentError(absl::StrCat("missing required flag --", s.name));
    }
  }
  return flags;
}

std::string Flags::Get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<int64_t> Flags::GetInt(const std::string& name, int64_t fallback) const {
  if (!Has(name)) return fallback;
  int64_t v;
  if (!absl::SimpleAtoi(Get(name), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", Get(name), "' is not an integer"));
  }
  return v;
}

absl::StatusOr<int64_t> Flags::GetCount(const std::string& name, int64_t fallback,
                                        int64_t min) const {
  if (!Has(name)) return fallback;
  absl::StatusOr<int64_t> v = GetInt(name, fallback);
  if (v.ok() && *v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": must be at least ", min, " (got ", *v, ")"));
  }
  return v;
}

absl::StatusOr<double> Flags::GetDouble(const std::string& name, double fallback) const {
  if (!Has(name)) return fallback;
  double v;
  if (!absl::SimpleAtod(Get(name), &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", Get(name), "' is not a number"));
  }
  return v;
}

std::string FlagsUsage(const std::vector<FlagSpec>& specs) {
  std::string out;
  for (const FlagSpec& s : specs) {
    absl::StrAppend(&out, absl::StrFormat("  --%-22s %s%s\n", s.name + (s.is_bool ? "" : " X"),
                                          s.help, s.required ? " (required)" : ""));
  }
  return out;
}

}  // namespace xhc
