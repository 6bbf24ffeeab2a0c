#ifndef XHC_RUNTIME_LAB_LAB_CONFIG_H_
#define XHC_RUNTIME_LAB_LAB_CONFIG_H_

// The shape the lab tools' configs share (configs/study.yaml, configs/ablation.yaml): one
// block of the tool's own keys beside `job:`, the job config every run starts from, and per
// run a job written from it and checked as any job config is.

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/common/config_reader.h"
#include "yaml-cpp/yaml.h"

namespace xhc::lab {

// Parses `yaml_text` as {BLOCK: {...}, job: {...}}: `read_block` reads the block's keys (its
// reader names them "BLOCK.key"); a missing `job`, a YAML error or a key the file should not
// have is kInvalidArgument naming it. Returns the job node, for the tool's own checks.
absl::StatusOr<YAML::Node> ParseLabConfig(
    const std::string& yaml_text, const std::string& block,
    const std::function<absl::Status(ConfigReader&)>& read_block);

// One run's job config as YAML text, checked as `xhc launch` would check it: a job the lab
// tool made invalid is an error naming the run, before anything runs.
absl::StatusOr<std::string> RunJobYaml(const std::string& run_id, const YAML::Node& job);

}  // namespace xhc::lab

#endif  // XHC_RUNTIME_LAB_LAB_CONFIG_H_
