#ifndef XHC_RUNTIME_TRANSPORT_TRANSPORT_H_
#define XHC_RUNTIME_TRANSPORT_TRANSPORT_H_

// The data plane between worker ranks: asynchronous point-to-point of float buffers (the
// [tokens, N, C] stage-boundary state and its gradient) plus the few world collectives a
// training step needs (global grad norm, loss). One Transport per worker rank; the
// StageExecutor owns it. Implementations: GlooTransport (CPU: TCP, or one cross-process copy
// between ranks on one host), FakeTransport (tests).
//
// Failure model (the same for every implementation, so the executor has one code path):
//  * Every blocking call takes a timeout; its error names what it waited for.
//  * The first failure of any operation (timeout, lost peer, Abort) makes the whole Transport
//    unusable: every later call returns an error carrying the first failure's code. This
//    mirrors gloo and NCCL, where an expired or broken operation leaves the connections in an
//    unknown state; the controller then aborts the step, rolls back and re-rendezvouses with
//    a fresh Transport.
//  * Codes: kDeadlineExceeded (the wait expired), kUnavailable (a peer is gone or the
//    connection broke, or the transport failed earlier), kAborted (Abort() was called),
//    kInvalidArgument (bad peer / tag / arguments).
//
// Threading:
//  * rank(), world_size(), Isend(), Irecv() and Abort() may be called from any thread,
//    concurrently.
//  * A Request is used by one thread at a time; different Requests may be waited on
//    concurrently from different threads.
//  * AllReduceSum() and Barrier() are collective: every rank calls the same sequence of them,
//    and at most one collective per Transport is in flight at a time (call them from one
//    thread). They may overlap with point-to-point traffic on other threads.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace xhc {

// ---- Tags -------------------------------------------------------------------------------
//
// A point-to-point tag names one message of the pipeline schedule. Layout (64 bits):
//   [63:56] 0xC5 marker   keeps our slots disjoint from gloo's collective slots (prefixes
//                         0x01..0x08 in the top byte) and rejects tags not made by MakeTag
//   [55:48] kind          TagKind
//   [47:32] stage_idx     the (virtual) pipeline stage whose boundary the message crosses:
//                         for forward activations the producing stage, for backward
//                         gradients the stage that consumes them (the same boundary id
//                         both ways is the caller's choice; the transport only needs both
//                         sides to agree)
//   [31:0]  microbatch_idx
// Messages between one (sender, receiver) pair with the same tag match in posting order, so
// a tag may be reused across training steps.

enum class TagKind : uint8_t {
  kForwardActivation = 1,
  kBackwardGradient = 2,
  // DualPipe: the two ranks that hold mirror copies of a chunk sum their weight gradients
  // (microbatch_idx = the parameter's index in the stage: one message per parameter).
  kMirrorGradient = 3,
  // Data parallelism: one bucket (microbatch_idx = bucket index) of a stage's step gradient,
  // sent to the same stage's holder in every other pipeline replica.
  kReplicaGradient = 4,
  // The step-end gradient norm: a rank's (arrival time, sum of squares), sent to every other
  // rank (stage_idx 0, microbatch_idx 0: one message per pair and step).
  kGradNorm = 5,
};

inline constexpr uint64_t kTagMarker = 0xC5;
inline constexpr int kMaxTagStage = 0xFFFF;

// Builds the tag of (kind, stage_idx, microbatch_idx). Requires 0 <= stage_idx <=
// kMaxTagStage and microbatch_idx >= 0; outside that range it returns a tag without the
// marker, which Isend/Irecv reject with kInvalidArgument (never a silently aliased tag).
constexpr uint64_t MakeTag(TagKind kind, int stage_idx, int microbatch_idx) {
  if (stage_idx < 0 || stage_idx > kMaxTagStage || microbatch_idx < 0) return 0;
  return (kTagMarker << 56) | (static_cast<uint64_t>(kind) << 48) |
         (static_cast<uint64_t>(stage_idx) << 32) | static_cast<uint32_t>(microbatch_idx);
}

struct TagParts {
  TagKind kind;
  int stage_idx;
  int microbatch_idx;
};

// True for tags made by MakeTag with in-range fields and a known kind.
bool IsValidTag(uint64_t tag);

// Inverse of MakeTag; kInvalidArgument for a tag IsValidTag rejects.
absl::StatusOr<TagParts> DecodeTag(uint64_t tag);

// "fwd stage 2 mb 5" (or "raw tag 0x..." for a tag not made by MakeTag); used in errors.
std::string TagToString(uint64_t tag);

// ---- Requests ---------------------------------------------------------------------------

// One posted send or receive. The caller keeps the buffer alive and untouched (a send's
// buffer may be read, a receive's is written) until Wait returns OK, or until the Transport
// has failed. A Request must be destroyed before its Transport. Destroying a Request whose
// Wait has not returned OK while the Transport is healthy fails the Transport (kUnavailable
// for everyone), because the engine may still own the buffer.
class Request {
 public:
  virtual ~Request() = default;

  // Blocks until the operation completed (OK), failed, or `timeout` passed
  // (kDeadlineExceeded naming the peer, the direction and the tag). `timeout` is a failure
  // deadline, not a poll: an expired Wait fails the Transport (see the failure model). It
  // must be finite. Once Wait has returned, later calls return the same status immediately.
  virtual absl::Status Wait(absl::Duration timeout) = 0;

  // How long the post (Isend or Irecv) spent moving the payload on the calling thread; zero
  // for a post that only registered the operation, as most do. Set when the post returns and
  // unchanged after. Callers account it as communication on that thread (it is not compute).
  virtual absl::Duration PostCopyTime() const { return absl::ZeroDuration(); }
};

// ---- Transport --------------------------------------------------------------------------

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Posts a send of data[0, count) to `peer` under `tag` and returns at once: the bytes move
  // in the background (engine threads), so compute continues. `peer` != rank(). The
  // matching Irecv on `peer` must use the same tag and the same count.
  virtual absl::StatusOr<std::unique_ptr<Request>> Isend(int peer, uint64_t tag, const float* data,
                                                         size_t count) = 0;

  // Posts a receive of exactly `count` floats from `peer` under `tag` into data[0, count).
  // Posting may copy: where the payload has already arrived (GlooTransport's same-host path,
  // whose descriptor can come before the receive), Irecv copies it into `data` on the calling
  // thread before it returns, and the Request's PostCopyTime says how long that took.
  virtual absl::StatusOr<std::unique_ptr<Request>> Irecv(int peer, uint64_t tag, float* data,
                                                         size_t count) = 0;

  // In-place sum over all ranks; every rank ends with the same values. The reduction order is
  // fixed for a given world size (same inputs => same bits on every run), though it need not
  // be rank order.
  virtual absl::Status AllReduceSum(double* data, size_t count, absl::Duration timeout) = 0;
  virtual absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) = 0;

  // Returns once every rank has entered Barrier.
  virtual absl::Status Barrier(absl::Duration timeout) = 0;

  // Fails the Transport from any thread: every pending Wait or collective on any thread
  // returns kAborted promptly, later calls return kAborted, and peers see this rank's
  // connections close (their pending operations with it fail with kUnavailable). Idempotent.
  // The controller calls it when it aborts a step because some peer died.
  virtual void Abort() = 0;
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_TRANSPORT_H_
