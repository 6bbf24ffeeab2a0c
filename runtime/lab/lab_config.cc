#include "runtime/lab/lab_config.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/common/config.h"

namespace xhc::lab {

absl::StatusOr<YAML::Node> ParseLabConfig(
    const std::string& yaml_text, const std::string& block,
    const std::function<absl::Status(ConfigReader&)>& read_block) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(block, " config: YAML error: ", e.what()));
  }
  ConfigReader top(root, "");
  ConfigReader own(YAML::Node(), block);
  RETURN_IF_ERROR(top.Child(block, &own));
  RETURN_IF_ERROR(read_block(own));
  if (!top.Has("job")) return InvalidKey("job", "missing (the job config every run starts from)");
  RETURN_IF_ERROR(top.Finish());
  return root["job"];
}

absl::StatusOr<std::string> RunJobYaml(const std::string& run_id, const YAML::Node& job) {
  std::string yaml = YAML::Dump(job) + "\n";
  absl::StatusOr<Config> parsed = ParseConfig(yaml);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("run ", run_id, ": job config invalid: ", parsed.status().message()));
  }
  return yaml;
}

}  // namespace xhc::lab
