#ifndef XHC_RUNTIME_TRANSPORT_GLOO_TRANSPORT_H_
#define XHC_RUNTIME_TRANSPORT_GLOO_TRANSPORT_H_

// Transport over gloo's TCP transport: one full mesh of TCP connections per job, set up by a
// rendezvous through a KvStore. Point-to-point uses gloo unbound buffers with slot = tag;
// collectives use gloo::allreduce / gloo::barrier. gloo reports errors by throwing; every
// exception is caught here and becomes an absl::Status (see transport.h for the codes).
//
// Engine facts this class builds on (gloo 2022-05, tcp transport):
//  * A receive is posted to a per-device event-loop thread, which reads its payload. A send
//    whose matching receive is already posted is written into the socket by the thread that
//    posts it, before the post returns (the rest, if the socket fills, by the event loop).
//    Both posts take the connection's lock, which the event loop holds while it reads a
//    payload and a send's post while it writes one. So every post is made from a thread of
//    this transport's own (post_thread.h): Isend and Irecv return at once, and Wait waits
//    for the post, then for the operation's completion.
//  * A wait that times out closes every connection of the context (gloo's own rule: the
//    pending operations may still own user buffers). Hence "first failure fails the
//    transport" in transport.h.
//  * A peer whose process dies closes its sockets; the event loop sees EOF and fails every
//    operation pending on that connection, so waits on a dead peer end promptly.
//  * A send is written only once its receive is posted on the other side (gloo's tcp pair
//    is rendezvous-based), so a send completes once its receive is posted.
//
// Same-host path: at rendezvous each pair of ranks probes whether one may read the other's
// memory (peer_memory.h); where it may, messages of kPullMinBytes or more from that peer
// cross as a descriptor and one process_vm_readv copy by the receiver (pull_receiver.h)
// instead of a TCP write and read. Everything else, and every peer that failed the probe,
// stays on TCP. The same completion rule holds on both paths.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/transport/failure_latch.h"
#include "runtime/transport/kv_store.h"
#include "runtime/transport/post_thread.h"
#include "runtime/transport/transport.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace xhc {

struct GlooTransportOptions {
  int rank = 0;
  int world_size = 1;
  // Address the TCP device binds to and advertises to its peers.
  std::string hostname = "127.0.0.1";
  // Prefix of every rendezvous key, so several rendezvous (job attempts) share one store.
  std::string store_prefix = "xhc/transport/";
  // Bounds the whole rendezvous: waiting for the other ranks' keys and connecting.
  absl::Duration connect_timeout = absl::Seconds(30);
  // Offer the same-host path to peers (both ends must, and the probe must pass);
  // XHC_SAME_HOST_COPY=0 in the environment switches it off whatever this says.
  bool same_host_copy = true;
};

class GlooRequestBase;
class GlooRequest;
class GlooPullRecv;
class PullReceiver;

class GlooTransport : public Transport {
 public:
  // Rendezvous with the other world_size - 1 ranks through `store` (which need only outlive
  // this call) and connect the full mesh. Blocks until every rank has called Create or
  // connect_timeout passes (kDeadlineExceeded naming the missing keys). Sets SIGPIPE to
  // ignored unless the process has a handler for it, so that a send to a peer that closed its
  // end fails with an error naming that peer instead of ending this process.
  static absl::StatusOr<std::unique_ptr<GlooTransport>> Create(const GlooTransportOptions& options,
                                                               KvStore* store);

  // Closes the connections; peers' pending operations with this rank fail (kUnavailable).
  // Every Request must have been destroyed already.
  ~GlooTransport() override;

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }

  absl::StatusOr<std::unique_ptr<Request>> Isend(int peer, uint64_t tag, const float* data,
                                                 size_t count) override;
  absl::StatusOr<std::unique_ptr<Request>> Irecv(int peer, uint64_t tag, float* data,
                                                 size_t count) override;
  absl::Status AllReduceSum(double* data, size_t count, absl::Duration timeout) override;
  absl::Status AllReduceSum(float* data, size_t count, absl::Duration timeout) override;
  absl::Status Barrier(absl::Duration timeout) override;
  void Abort() override;

  // The gloo context, for benchmarks that compare against raw gloo on the same connections.
  const std::shared_ptr<gloo::Context>& gloo_context() const { return context_; }

  // Whether large messages from / to `peer` take the same-host path (the probe's verdict).
  bool SameHostFrom(int peer) const;
  bool SameHostTo(int peer) const;
  // Messages received over the same-host path so far, from every peer.
  uint64_t same_host_received() const;

 private:
  friend class GlooRequest;
  friend class GlooPullRecv;

  GlooTransport(int rank, int world_size, std::shared_ptr<gloo::Context> context);

  absl::StatusOr<std::unique_ptr<Request>> Post(bool is_send, int peer, uint64_t tag, float* data,
                                                size_t count);
  // The rendezvous's last step: every pair learns whether either end may read the other's
  // memory, and the receivers of the same-host path start.
  absl::Status ProbeSameHost(bool enabled, absl::Duration timeout);
  template <typename T>
  absl::Status AllReduceImpl(T* data, size_t count, absl::Duration timeout, const char* type_name);

  // Turns an exception from gloo, thrown while doing `what` ("waiting for recv from rank 1
  // (fwd stage 0 mb 3)"), into the Status the contract promises.
  absl::Status StatusFromGloo(const char* message, absl::Duration timeout,
                              const std::string& what) const;
  // Records `status` as the transport's failure (if first) and closes every connection, so
  // no pending operation can touch a caller's buffer later and peers learn promptly.
  absl::Status Fail(absl::Status status);
  // A request destroyed before its Wait returned OK, while this transport is healthy: fails
  // it (transport.h's contract), naming `request`.
  void FailAbandoned(const std::string& request);
  void CloseEngine();

  void Register(GlooRequestBase* request);
  void Unregister(GlooRequestBase* request);

  const int rank_;
  const int world_size_;
  std::shared_ptr<gloo::Context> context_;
  FailureLatch latch_;
  std::atomic<bool> aborted_{false};
  std::mutex requests_mu_;
  absl::flat_hash_set<GlooRequestBase*> requests_;  // guarded by requests_mu_
  // The same-host path (set up by ProbeSameHost, fixed after): what peers read to prove
  // they may, the receiver of each peer this rank reads from (null: TCP), whether each peer
  // reads from this rank, and the sequence numbers of the descriptors sent to each peer.
  // The nonce stays while this transport is healthy and is cleared (Fail, Abort, the
  // destructor) before any caller can learn of a failure and reuse a send's buffer: a
  // receiver that reads it intact after its copy knows the copy read the message.
  std::atomic<uint64_t> probe_nonce_{0};
  std::vector<std::unique_ptr<PullReceiver>> pullers_;
  std::vector<bool> pulled_by_;
  std::vector<uint64_t> next_seq_;  // used by the post thread only
  // Makes the posts (declared last: joined before anything above goes).
  PostThread poster_;
};

// gloo takes millisecond timeouts; this rounds up (a wait never ends before `timeout`) and
// rejects the infinite duration, because every wait must have a deadline.
absl::StatusOr<std::chrono::milliseconds> ToGlooTimeout(absl::Duration timeout,
                                                        const std::string& what);

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_GLOO_TRANSPORT_H_
