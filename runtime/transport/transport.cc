#include "runtime/transport/transport.h"

#include "absl/strings/str_format.h"

namespace xhc {
namespace {

const char* KindName(TagKind kind) {
  switch (kind) {
    case TagKind::kForwardActivation: return "fwd";
    case TagKind::kBackwardGradient: return "bwd";
    case TagKind::kMirrorGradient: return "mirror-grad";
    case TagKind::kReplicaGradient: return "replica-grad";
    case TagKind::kGradNorm: return "grad-norm";
  }
  return nullptr;
}

}  // namespace

bool IsValidTag(uint64_t tag) {
  if ((tag >> 56) != kTagMarker) return false;
  const auto kind = static_cast<TagKind>((tag >> 48) & 0xFF);
  if (KindName(kind) == nullptr) return false;
  return (tag & 0xFFFFFFFFu) <= 0x7FFFFFFFu;  // microbatch_idx came from a non-negative int
}

absl::StatusOr<TagParts> DecodeTag(uint64_t tag) {
  if (!IsValidTag(tag)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("tag 0x%016x was not made by MakeTag (or had out-of-range fields)", tag));
  }
  TagParts parts;
  parts.kind = static_cast<TagKind>((tag >> 48) & 0xFF);
  parts.stage_idx = static_cast<int>((tag >> 32) & 0xFFFF);
  parts.microbatch_idx = static_cast<int>(tag & 0xFFFFFFFFu);
  return parts;
}

std::string TagToString(uint64_t tag) {
  absl::StatusOr<TagParts> parts = DecodeTag(tag);
  if (!parts.ok()) return absl::StrFormat("raw tag 0x%016x", tag);
  return absl::StrFormat("%s stage %d mb %d", KindName(parts->kind), parts->stage_idx,
                         parts->microbatch_idx);
}

}  // namespace xhc
