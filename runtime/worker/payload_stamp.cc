#include "runtime/worker/payload_stamp.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace xhc::worker {
namespace {

// Marks a trailer written by WriteStamp: a buffer of a wrong size or from another source
// fails here rather than on a field that happens to match.
constexpr uint32_t kMagic = 0x58484353;  // "XHCS"

struct Packed {
  uint32_t magic;
  int32_t sender, stage, mb;
  int64_t step, send_unix_us;
};
static_assert(sizeof(Packed) == kStampFloats * sizeof(float));

std::string Describe(const PayloadStamp& s) {
  return absl::StrFormat("rank %d, stage %d, micro-batch %d, step %d", s.sender, s.stage, s.mb,
                         s.step);
}

}  // namespace

void WriteStamp(const PayloadStamp& stamp, float* data, size_t payload) {
  const Packed p{kMagic, stamp.sender, stamp.stage, stamp.mb, stamp.step, stamp.send_unix_us};
  std::memcpy(data + payload, &p, sizeof(p));
}

absl::StatusOr<PayloadStamp> ReadStamp(const float* data, size_t payload,
                                       const PayloadStamp& expected, const std::string& what) {
  Packed p;
  std::memcpy(&p, data + payload, sizeof(p));
  if (p.magic != kMagic) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the payload has no sender stamp (expected one from %s): the peers disagree on "
        "the message size or the message is not a pipeline payload",
        what, Describe(expected)));
  }
  const PayloadStamp got{p.sender, p.stage, p.mb, p.step, p.send_unix_us};
  if (got.sender != expected.sender || got.stage != expected.stage || got.mb != expected.mb ||
      got.step != expected.step) {
    return absl::DataLossError(absl::StrFormat("%s: expected the payload of %s, got that of %s",
                                               what, Describe(expected), Describe(got)));
  }
  return got;
}

WaitSplit SplitWait(int64_t wait_start_us, int64_t wait_end_us, int64_t send_us) {
  const int64_t end = std::max(wait_start_us, wait_end_us);
  const int64_t transfer_from = std::clamp(send_us, wait_start_us, end);
  return {static_cast<double>(transfer_from - wait_start_us),
          static_cast<double>(end - transfer_from)};
}

}  // namespace xhc::worker
