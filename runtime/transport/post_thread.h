#ifndef XHC_RUNTIME_TRANSPORT_POST_THREAD_H_
#define XHC_RUNTIME_TRANSPORT_POST_THREAD_H_

// One thread that runs queued jobs one at a time, in the order they were queued.
//
// Why GlooTransport has one: where the peer's receive is already posted, gloo's tcp pair
// writes a send's payload into the socket from the thread that calls send(), before send()
// returns. On loopback that is the user-to-kernel copy and the TCP stack for the whole
// message: 1.0-1.4 ms per 4 MiB stage-boundary state on the compute thread (AMD EPYC, 2
// cores), where Transport::Isend promises to return at once. Isend queues the post here
// instead, and so does Irecv: a receive's post takes the connection's lock, which gloo's
// event loop holds while it reads a payload (docs/design/transport-post-thread.md). One
// thread, first in first out, so posts keep their order (messages with the same peer and tag
// match in that order).

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/time/time.h"

namespace xhc {

class PostThread {
 public:
  using Id = uint64_t;

  PostThread();
  // Drops the jobs still queued (their owners are gone by contract) and joins.
  ~PostThread();
  PostThread(const PostThread&) = delete;
  PostThread& operator=(const PostThread&) = delete;

  // Queues `job`; returns its id (increasing).
  Id Queue(std::function<void()> job);

  // Blocks until job `id` has run (true), or until `deadline` passes or Interrupt() has
  // been called (false; the job may still run later).
  bool AwaitDone(Id id, absl::Time deadline);

  // Job `id` will not run after this returns: dropped if it had not started (true), waited
  // for if it was running, nothing if it had run (false).
  bool CancelOrAwait(Id id);

  // Every AwaitDone returns false at once, now and from now on (Transport::Abort).
  void Interrupt();

 private:
  void Loop();
  bool DoneLocked(Id id) const;

  std::mutex mu_;
  std::condition_variable queued_;  // a job was queued, or the thread must stop
  std::condition_variable ran_;     // a job finished, or Interrupt()
  std::deque<std::pair<Id, std::function<void()>>> queue_;  // guarded by mu_
  Id next_id_ = 1;                                          // guarded by mu_
  Id running_ = 0;                                          // 0: none; guarded by mu_
  bool stop_ = false, interrupted_ = false;                 // guarded by mu_
  std::thread thread_;  // last: started once everything above is built
};

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_POST_THREAD_H_
