// Fuzzes DecodeManifest (MANIFEST.json is read from disk on every resume and by `xhc ckpt
// verify`). What decodes must survive EncodeManifest -> DecodeManifest unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/manifest_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<xhc::Manifest> m = xhc::DecodeManifest(text, "fuzz/MANIFEST.json");
  if (!m.ok()) {
    if (m.status().message().empty()) std::abort();
    return 0;
  }
  absl::StatusOr<xhc::Manifest> again = xhc::DecodeManifest(xhc::EncodeManifest(*m), "again");
  if (!again.ok() || again->step != m->step || again->shards.size() != m->shards.size() ||
      again->config_yaml != m->config_yaml || again->rng != m->rng) {
    std::abort();
  }
  for (size_t i = 0; i < m->shards.size(); ++i) {
    if (again->shards[i].file != m->shards[i].file ||
        again->shards[i].bytes != m->shards[i].bytes ||
        again->shards[i].tensors != m->shards[i].tensors) {
      std::abort();
    }
  }
  return 0;
}
