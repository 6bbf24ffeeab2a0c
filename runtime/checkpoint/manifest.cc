// MANIFEST.json encoding (see FORMAT.md).
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
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
    j["shards"].push_back({{"file", s.file}, {"bytes", s.bytes}, {"xxhash64", s.xxhash64},
                           {"tensors", s.tensors}});
  }
  return j.dump(2) + "\n";
}

absl::StatusOr<Manifest> DecodeManifest(const std::string& text, const std::string& origin) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto corrupt = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(origin, ": ", why));
  };
  if (j.is_discarded() || !j.is_object()) return corrupt("not a JSON object (truncated?)");
  try {
    Manifest m;
    m.format_version = j.at("format_version").get<int>();
    if (m.format_version != kCheckpointFormatVersion) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": format_version ",
                                                     m.format_version, " is not supported"));
    }
    m.step = j.at("step").get<int64_t>();
    m.config_yaml = j.at("config_yaml").get<std::string>();
    m.sampler_step = j.at("sampler").at("step").get<int64_t>();
    m.rng = j.at("rng").get<std::map<std::string, std::string>>();
    m.layout = j.value("layout", "");
    if (m.step < 0 || m.sampler_step < 0) return corrupt("negative step");
    if (!j.at("shards").is_array()) return corrupt("shards is not a list");
    for (const auto& s : j.at("shards")) {
      ShardRecord r;
      r.file = s.at("file").get<std::string>();
      r.bytes = s.at("bytes").get<int64_t>();
      r.xxhash64 = s.at("xxhash64").get<std::string>();
      r.tensors = s.at("tensors").get<std::vector<std::string>>();
      // The file is joined to the step directory and read: a manifest from elsewhere must
      // not point the loader at "../../x" or "/etc/passwd".
      if (r.file.empty() || r.file == "." || r.file == ".." ||
          r.file.find_first_of(std::string("/\\\0", 3)) != std::string::npos) {
        return corrupt(absl::StrCat("shard file '", r.file,
                                    "' is not a plain file name in the step directory"));
      }
      if (r.bytes < 0) return corrupt(absl::StrCat("shard ", r.file, ": negative bytes"));
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
