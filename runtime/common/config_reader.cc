#include "runtime/common/config_reader.h"

#include <utility>

namespace xhc {

absl::Status InvalidKey(const std::string& key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(key, ": ", why));
}

ConfigReader::ConfigReader(YAML::Node node, std::string path)
    : node_(std::move(node)), path_(std::move(path)) {}

bool ConfigReader::Has(const std::string& key) {
  known_.insert(key);
  return node_ && node_.IsMap() && node_[key];
}

absl::Status ConfigReader::Child(const std::string& key, ConfigReader* out) {
  known_.insert(key);
  YAML::Node child;
  if (node_ && node_.IsMap() && node_[key]) {
    child = node_[key];
    if (!child.IsMap() && !child.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat(Key(key), ": expected a mapping"));
    }
  }
  *out = ConfigReader(child, Key(key));
  return absl::OkStatus();
}

absl::Status ConfigReader::Finish() const {
  if (!node_ || !node_.IsMap()) return absl::OkStatus();
  for (const auto& entry : node_) {
    // A non-scalar key ("? [a, b]") made as<std::string>() throw out of the parser (found by
    // hand-written input in the config_fuzzer corpus).
    if (!entry.first.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Key("?"), ": a key must be a plain name, not '", YAML::Dump(entry.first), "'"));
    }
    const std::string key = entry.first.Scalar();
    if (!known_.count(key)) {
      return absl::InvalidArgumentError(absl::StrCat(Key(key), ": unknown key"));
    }
  }
  return absl::OkStatus();
}

std::string ConfigReader::Key(const std::string& key) const {
  return path_.empty() ? key : absl::StrCat(path_, ".", key);
}

}  // namespace xhc
