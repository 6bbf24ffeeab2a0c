// MANIFEST.json encoding (see FORMAT.md).
#include <cstdint>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/manifest_json.h"

namespace xhc {

std::string EncodeManifest(const Manifest& m) {
  nlohmann::json j;
  j["format_version"] = m.format_version;
  j["step"] = m.step;
  j["config_yaml"] = m.config_yaml;
  j["sampler"] = {{"step", m.sampler_step}};
  j["rng"] = m.rng;
  j["layout"] = m.layout;
  j["shards"] = nlohmann::json::array();
  for (const ShardRecord& s : m.shards) {
    j["shards"].push_back(
        {{"file", s.file}, {"bytes", s.bytes}, {"xxhash64", s.xxhash64}, {"tensors", s.tensors}});
  }
  return j.dump(2) + "\n";
}

namespace {

// An integer field within [0, INT64_MAX]. nlohmann's get<int64_t>() converts a float such as
// 1.2e59 to int64, which is undefined (found by manifest_fuzzer; UBSan), and wraps unsigned
// values above INT64_MAX; an error names the field instead. json::exception when missing.
absl::StatusOr<int64_t> Count(const nlohmann::json& j, const std::string& key,
                              const std::string& origin) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX) ||
      (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    return absl::DataLossError(
        absl::StrCat(origin, ": ", key, " ", v.dump(), " is not an integer in [0, 2^63)"));
  }
  return v.get<int64_t>();
}

}  // namespace

absl::StatusOr<Manifest> DecodeManifest(const std::string& text, const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(origin, ": ", why));
  };
  if (j.is_discarded() || !j.is_object()) return corrupt("not a JSON object (truncated?)");
  try {
    Manifest m;
    ASSIGN_OR_RETURN(const int64_t version, Count(j, "format_version", origin));
    if (version != kCheckpointFormatVersion) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": format_version ", version, " is not supported"));
    }
    m.format_version = static_cast<int>(version);
    ASSIGN_OR_RETURN(m.step, Count(j, "step", origin));
    m.config_yaml = j.at("config_yaml").get<std::string>();
    ASSIGN_OR_RETURN(m.sampler_step, Count(j.at("sampler"), "step", origin));
    m.rng = j.at("rng").get<std::map<std::string, std::string>>();
    m.layout = j.value("layout", "");
    if (!j.at("shards").is_array()) return corrupt("shards is not a list");
    for (const auto& s : j.at("shards")) {
      ShardRecord r;
      r.file = s.at("file").get<std::string>();
      ASSIGN_OR_RETURN(r.bytes, Count(s, "bytes", origin));
      r.xxhash64 = s.at("xxhash64").get<std::string>();
      r.tensors = s.at("tensors").get<std::vector<std::string>>();
      // The file is joined to the step directory and read: a manifest from elsewhere must
      // not point the loader at "../../x" or "/etc/passwd".
      if (r.file.empty() || r.file == "." || r.file == ".." ||
          r.file.find_first_of(std::string("/\\\0", 3)) != std::string::npos) {
        return corrupt(absl::StrCat("shard file '", r.file,
                                    "' is not a plain file name in the step directory"));
      }
      if (r.xxhash64.size() != 16 ||
          r.xxhash64.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return corrupt(absl::StrCat("shard ", r.file, ": xxhash64 '", r.xxhash64,
                                    "' is not 16 lowercase hex digits"));
      }
      m.shards.push_back(std::move(r));
    }
    if (m.shards.empty()) return corrupt("lists no shards");
    return m;
  } catch (const nlohmann::json::exception& e) {
    return corrupt(absl::StrCat("missing or malformed field (", e.what(), ")"));
  }
}

}  // namespace xhc
