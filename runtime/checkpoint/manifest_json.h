#ifndef XHC_RUNTIME_CHECKPOINT_MANIFEST_JSON_H_
#define XHC_RUNTIME_CHECKPOINT_MANIFEST_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/checkpoint/checkpoint.h"

namespace xhc {

std::string EncodeManifest(const Manifest& manifest);

// kDataLoss naming `origin` when the text is truncated or a field is missing.
absl::StatusOr<Manifest> DecodeManifest(const std::string& text, const std::string& origin);

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_MANIFEST_JSON_H_
