#ifndef XHC_RUNTIME_WORKER_PAYLOAD_STAMP_H_
#define XHC_RUNTIME_WORKER_PAYLOAD_STAMP_H_

// The trailer every pipeline payload carries: who sent it, for which stage boundary,
// micro-batch and step, and when the send was posted. The receiver checks the first four
// (a misrouted or stale message is an error that names both sides, never silently consumed)
// and uses the last to split its wait into the time the peer was still computing (bubble)
// and the time the bytes were in flight after they existed (exposed communication).
//
// The trailer occupies the last kStampFloats float slots of the buffer (raw bytes, not
// numbers): buffers are sized payload + kStampFloats, so stamping never reallocates.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace xhc::worker {

inline constexpr size_t kStampFloats = 8;  // 32 bytes

struct PayloadStamp {
  int32_t sender = -1;
  int32_t stage = -1;  // the boundary's tag stage (transport.h)
  int32_t mb = -1;
  int64_t step = -1;
  int64_t send_unix_us = 0;  // when the send was posted (the sender's wall clock)
};

// Writes `stamp` into data[payload, payload + kStampFloats).
void WriteStamp(const PayloadStamp& stamp, float* data, size_t payload);

// Reads the trailer at data[payload, ...) and checks sender, stage, micro-batch and step
// against `expected` (send_unix_us is not compared). `what` names the receive in errors.
absl::StatusOr<PayloadStamp> ReadStamp(const float* data, size_t payload,
                                       const PayloadStamp& expected, const std::string& what);

// A blocking wait [wait_start, wait_end] on a payload whose send was posted at send_us:
// the part before the send existed is the peer's compute (bubble), the rest is the
// transfer the receiver could not hide (both in µs, clamped to the wait). Across hosts the
// two clocks differ by their NTP error, which moves time between the two parts.
struct WaitSplit {
  double peer_us = 0, transfer_us = 0;
};
WaitSplit SplitWait(int64_t wait_start_us, int64_t wait_end_us, int64_t send_us);

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_PAYLOAD_STAMP_H_
