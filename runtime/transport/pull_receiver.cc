#include "runtime/transport/pull_receiver.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "runtime/transport/peer_memory.h"

namespace xhc {
namespace {

// gloo has no wait without a deadline (an expired one closes every connection), so the
// thread that waits for the next descriptor waits this long: an idle transport older than
// that fails, as any other expired wait does.
constexpr std::chrono::milliseconds kIdleTimeout = std::chrono::hours(24 * 90);

// The acknowledgement's payload: its arrival is the message; the value is not read.
uint64_t ack_word = 0;

}  // namespace

PullReceiver::PullReceiver(std::shared_ptr<gloo::Context> context, int peer, pid_t peer_pid,
                           uint64_t nonce_addr, uint64_t nonce, ErrorHook on_error, FailHook fail)
    : context_(std::move(context)),
      peer_(peer),
      peer_pid_(peer_pid),
      nonce_addr_(nonce_addr),
      nonce_(nonce),
      on_error_(std::move(on_error)),
      fail_(std::move(fail)),
      incoming_buffer_(context_->createUnboundBuffer(&incoming_, sizeof(incoming_))),
      thread_([this] { Loop(); }) {}

PullReceiver::~PullReceiver() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  incoming_buffer_->abortWaitRecv();  // wakes the thread; the flag holds until a wait sees it
  thread_.join();
}

uint64_t PullReceiver::pulled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pulled_;
}

void PullReceiver::Loop() {
  const std::string what =
      absl::StrFormat("waiting for same-host message descriptors from rank %d", peer_);
  absl::Status error;
  try {
    incoming_buffer_->recv(peer_, kPullDescriptorSlot);
  } catch (const std::exception& e) {
    error = on_error_(e.what(), what);
  }
  for (;;) {
    bool arrived = false;
    PullDescriptor d;
    if (error.ok()) {
      try {
        arrived = incoming_buffer_->waitRecv(nullptr, kIdleTimeout);
        if (arrived) {
          d = incoming_;
          // The next descriptor may cross while this one is copied.
          incoming_buffer_->recv(peer_, kPullDescriptorSlot);
        }
      } catch (const std::exception& e) {
        error = on_error_(e.what(), what);
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) return;
    if (!error.ok() || !arrived) {
      // Not stopping, so the engine failed (the peer gone, an expired wait elsewhere, Abort):
      // every receive from this peer, posted now or later, ends with that failure, which
      // fails the transport when one is waited on (as a TCP receive from a dead peer does).
      FailAllLocked(error.ok() ? absl::AbortedError(what + ": aborted") : error);
      return;
    }
    auto it = posted_.find(d.tag);
    if (it == posted_.end()) {
      arrived_[d.tag].push_back(d);
      continue;
    }
    Pending* p = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) posted_.erase(it);
    p->copying = true;
    lock.unlock();
    Pull(p, d);
  }
}

void PullReceiver::Post(Pending* p) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failed_.ok()) {
    p->done = true;
    p->status = failed_;
    return;
  }
  auto it = arrived_.find(p->tag);
  if (it == arrived_.end()) {
    posted_[p->tag].push_back(p);
    return;
  }
  const PullDescriptor d = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) arrived_.erase(it);
  p->copying = true;
  lock.unlock();
  const absl::Time start = absl::Now();
  Pull(p, d);
  p->post_copy = absl::Now() - start;
}

void PullReceiver::Pull(Pending* p, const PullDescriptor& d) {
  absl::Status status;
  if (d.bytes != p->bytes) {
    status = fail_(absl::InvalidArgumentError(absl::StrFormat(
        "recv from rank %d: the sender's message has %d bytes, the receive expects %d", peer_,
        d.bytes, p->bytes)));
  } else {
    status = ReadPeerMemory(peer_pid_, d.addr, p->dst, p->bytes);
    // The sender clears its nonce before any of its callers can learn that it failed, the
    // only way its buffer could change before the acknowledgement: intact after the copy
    // means the copy read the message.
    uint64_t seen = 0;
    if (status.ok()) status = ReadPeerMemory(peer_pid_, nonce_addr_, &seen, sizeof(seen));
    if (status.ok() && seen != nonce_) {
      status = absl::UnavailableError("the sender's transport failed during the copy");
    }
    if (!status.ok()) {
      status = fail_(absl::UnavailableError(
          absl::StrFormat("recv from rank %d over the same-host path: %s (the peer's process "
                          "ended or freed the buffer)",
                          peer_, status.message())));
    }
  }
  if (status.ok()) {
    // The sender posted this receive before its descriptor, so the write below goes out at
    // once and the wait only collects its completion.
    try {
      std::unique_ptr<gloo::transport::UnboundBuffer> ack =
          context_->createUnboundBuffer(&ack_word, sizeof(ack_word));
      ack->send(peer_, PullAckSlot(d.seq));
      ack->waitSend(nullptr, std::chrono::seconds(60));
    } catch (const std::exception& e) {
      status = fail_(on_error_(
          e.what(), absl::StrFormat("acknowledging a same-host message to rank %d", peer_)));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  p->copying = false;
  p->done = true;
  p->status = status;
  if (status.ok()) ++pulled_;
  changed_.notify_all();
}

bool PullReceiver::Await(Pending* p, absl::Time deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (p->done) return true;
    // A copy in progress is let finish: once Wait returns, nothing writes into p->dst.
    if (p->aborted && !p->copying) {
      p->done = true;
      p->status = absl::AbortedError("aborted: Abort() was called");
      return true;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration() && !p->copying) return false;
    changed_.wait_for(lock, absl::ToChronoNanoseconds(std::max(left, absl::Milliseconds(1))));
  }
}

void PullReceiver::Abort(Pending* p) {
  std::lock_guard<std::mutex> lock(mu_);
  p->aborted = true;
  changed_.notify_all();
}

void PullReceiver::Remove(Pending* p) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait(lock, [p] { return !p->copying; });
  auto it = posted_.find(p->tag);
  if (it == posted_.end()) return;
  for (auto q = it->second.begin(); q != it->second.end(); ++q) {
    if (*q == p) {
      it->second.erase(q);
      break;
    }
  }
  if (it->second.empty()) posted_.erase(it);
}

void PullReceiver::FailAllLocked(const absl::Status& status) {
  if (failed_.ok()) failed_ = status;
  for (auto& [tag, queue] : posted_) {
    for (Pending* p : queue) {
      p->done = true;
      p->status = failed_;
    }
  }
  posted_.clear();
  changed_.notify_all();
}

}  // namespace xhc
