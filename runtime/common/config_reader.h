#ifndef XHC_RUNTIME_COMMON_CONFIG_READER_H_
#define XHC_RUNTIME_COMMON_CONFIG_READER_H_

// Strict reading of one YAML mapping: every read key is remembered, so Finish() can name any
// key nobody asked for (a typo such as `n_layer:` is an error, never a silent default).

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace xhc {

// kInvalidArgument "KEY: WHY", the one shape of a config error: every message names its key.
absl::Status InvalidKey(const std::string& key, const std::string& why);

class ConfigReader {
 public:
  // `path` is the dotted prefix used in messages ("model.residual").
  ConfigReader(YAML::Node node, std::string path);

  // True when `key` is present (and marks it as known).
  bool Has(const std::string& key);

  // Reads an optional scalar/sequence; leaves *out unchanged when the key is absent.
  template <typename T>
  absl::Status Get(const std::string& key, T* out) {
    known_.insert(key);
    if (!node_ || !node_.IsMap()) return absl::OkStatus();
    YAML::Node value = node_[key];
    if (!value) return absl::OkStatus();
    try {
      *out = value.as<T>();
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          absl::StrCat(Key(key), ": cannot parse '", YAML::Dump(value), "' (", e.what(), ")"));
    }
    return absl::OkStatus();
  }

  // A nested mapping (possibly absent: then an empty reader).
  absl::Status Child(const std::string& key, ConfigReader* out);

  // kInvalidArgument naming the first unknown key, if any.
  absl::Status Finish() const;

  // "model.residual.n_active" for key "n_active".
  std::string Key(const std::string& key) const;

 private:
  YAML::Node node_;
  std::string path_;
  std::set<std::string> known_;
};

}  // namespace xhc

#endif  // XHC_RUNTIME_COMMON_CONFIG_READER_H_
