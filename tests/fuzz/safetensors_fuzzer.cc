// Fuzzes DecodeSafetensors, the parser of shard files (untrusted: a checkpoint or weights
// file from anywhere). Beyond "no crash, no sanitizer report, no allocation beyond the
// -malloc_limit_mb bound": whatever decodes must re-encode and decode to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<xhc::SafetensorsContents> decoded = xhc::DecodeSafetensors(bytes, "fuzz");
  if (!decoded.ok()) {
    if (decoded.status().message().empty()) std::abort();  // every error says what is wrong
    return 0;
  }
  std::vector<xhc::TensorView> views;
  for (const auto& [name, t] : decoded->tensors) views.push_back({name, t.shape, t.values.data()});
  const std::string again = xhc::EncodeSafetensors(views, decoded->metadata);
  absl::StatusOr<xhc::SafetensorsContents> round = xhc::DecodeSafetensors(again, "re-encoded");
  if (!round.ok() || round->tensors.size() != decoded->tensors.size()) std::abort();
  for (const auto& [name, t] : decoded->tensors) {
    const xhc::Tensor& u = round->tensors.at(name);
    if (u.shape != t.shape || u.values.size() != t.values.size()) std::abort();
  }
  return 0;
}
