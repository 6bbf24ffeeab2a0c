#ifndef XHC_RUNTIME_TRANSPORT_PULL_RECEIVER_H_
#define XHC_RUNTIME_TRANSPORT_PULL_RECEIVER_H_

// The receiving end of GlooTransport's same-host path with one peer (peer_memory.h says why
// the path exists). A large message on that path crosses as a 32-byte descriptor (tag,
// sequence number, the sender's address, length) on one gloo slot of the pair; this rank
// copies the payload straight out of the sender's buffer with process_vm_readv and answers
// on a slot of that message's own (PullAckSlot), which completes the sender's request: until
// then the sender keeps its buffer untouched, as Transport::Isend already requires.
//
// Progress does not wait for the receiving thread: a thread of this class takes each
// descriptor as it arrives and, where its receive is posted, copies at once, so a send
// completes once its receive is posted, as over TCP, whether or not anyone waits on it yet.
// A descriptor that arrives before its receive is held until Post, which then copies on the
// posting thread. Matching is by tag, first in first out, as gloo matches slots.

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace xhc {

// What crosses the pair's descriptor slot for one message (plain bytes; same build).
struct PullDescriptor {
  uint64_t tag = 0;
  uint64_t seq = 0;   // the sender's count of same-host messages to this peer
  uint64_t addr = 0;  // the payload in the sender's address space
  uint64_t bytes = 0;
};

// Slots of the same-host path. Their top bytes (0xC6-0xC8) are neither the point-to-point
// marker (0xC5, transport.h) nor gloo's collective prefixes (0x01-0x08).
inline constexpr uint64_t kPullDescriptorSlot = 0xC6ull << 56;
inline constexpr uint64_t PullAckSlot(uint64_t seq) {
  return (0xC7ull << 56) | (seq & ((1ull << 56) - 1));
}
inline constexpr uint64_t kPeerProbeSlot = 0xC8ull << 56;

// Messages of at least this many bytes take the same-host path: the stage-boundary states
// (4 MiB at the quickstart's width). Smaller ones stay on TCP, where one write costs less
// than a descriptor, a copy and an acknowledgement (each a thread hand-off on busy cores);
// with 64 KiB, DualPipe's per-parameter mirror sums took the path too and the dualpipe job
// ran slower (docs/design/same-host-path.md).
inline constexpr size_t kPullMinBytes = 1024 * 1024;

class PullReceiver {
 public:
  // One posted receive; owned by its request, registered here from Post to Remove.
  struct Pending {
    uint64_t tag = 0;
    float* dst = nullptr;
    size_t bytes = 0;
    bool done = false;  // guarded by the receiver's mutex, as are the fields below
    bool copying = false;
    bool aborted = false;
    absl::Status status;
    // Set by Post on the posting thread where it copied (the descriptor came first): how
    // long the copy took there. Read by that thread only, after Post returns.
    absl::Duration post_copy = absl::ZeroDuration();
  };

  // `on_error(gloo_message, what)` translates an exception of gloo's into the Status the
  // transport's contract names; `fail(status)` records a failure as the transport's (and
  // closes its connections), returning the Status for the waiters.
  using ErrorHook = std::function<absl::Status(const char*, const std::string&)>;
  using FailHook = std::function<absl::Status(absl::Status)>;

  // The peer's nonce at `nonce_addr` in its memory (the probe's) stays `nonce` while its
  // transport is healthy: read again after each copy, it tells an intact copy from one of a
  // buffer its owner may have reused after failing.
  PullReceiver(std::shared_ptr<gloo::Context> context, int peer, pid_t peer_pid,
               uint64_t nonce_addr, uint64_t nonce, ErrorHook on_error, FailHook fail);
  // Stops the thread (every request must be gone: Transport's contract).
  ~PullReceiver();
  PullReceiver(const PullReceiver&) = delete;
  PullReceiver& operator=(const PullReceiver&) = delete;

  // Registers `p`; copies now, on this thread, if its descriptor has already arrived (and
  // records how long that took in p->post_copy).
  void Post(Pending* p);
  // Blocks until `p` is done (true; p->status says how) or `deadline` passes (false).
  bool Await(Pending* p, absl::Time deadline);
  // Wakes Await on `p` (Transport::Abort); p ends kAborted.
  void Abort(Pending* p);
  // `p` is going: dropped if still queued, a copy into it in progress waited for.
  void Remove(Pending* p);

  int peer() const { return peer_; }
  // Messages copied so far (tests and the rendezvous log use it).
  uint64_t pulled() const;

 private:
  void Loop();
  // Copies d's payload into p, answers the sender, marks p done. Called without the lock,
  // with p->copying set.
  void Pull(Pending* p, const PullDescriptor& d);
  void FailAllLocked(const absl::Status& status);

  const std::shared_ptr<gloo::Context> context_;
  const int peer_;
  const pid_t peer_pid_;
  const uint64_t nonce_addr_, nonce_;
  const ErrorHook on_error_;
  const FailHook fail_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  absl::flat_hash_map<uint64_t, std::deque<Pending*>> posted_;         // guarded by mu_
  absl::flat_hash_map<uint64_t, std::deque<PullDescriptor>> arrived_;  // guarded by mu_
  absl::Status failed_;                                                // guarded by mu_
  bool stop_ = false;                                                  // guarded by mu_
  uint64_t pulled_ = 0;                                                // guarded by mu_
  PullDescriptor incoming_;  // written by gloo, read by the thread
  std::unique_ptr<gloo::transport::UnboundBuffer> incoming_buffer_;
  std::thread thread_;  // last: started once everything above is built
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_PULL_RECEIVER_H_
