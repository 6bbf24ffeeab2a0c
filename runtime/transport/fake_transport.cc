#include "runtime/transport/fake_transport.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/status_macros.h"

namespace xhc {
namespace fake_transport_internal {

struct Op {
  bool is_send;
  int owner;  // the rank that posted it
  int peer;
  uint64_t tag;
  float* data;
  size_t count;
  bool done = false;
  absl::Status status;  // meaningful once done

  std::string Describe() const {
    return absl::StrFormat("%s rank %d (%s)", is_send ? "send to" : "recv from", peer,
                           TagToString(tag));
  }
};

struct Round {
  std::vector<std::vector<double>> inputs;  // by rank; empty until that rank arrives
  std::vector<bool> arrived;
  int num_arrived = 0;
  int num_departed = 0;
  size_t count = 0;
  absl::Status status;  // set when every rank arrived: OK or a count mismatch
  std::vector<double> result;
};

struct World {
  explicit World(int n) : world_size(n), failure(n) {}

  const int world_size;
  // Every member below is guarded by mu. Waiters sleep on `changed`, which every WorldLock
  // notifies when it releases mu (the re-check on every release that absl::Mutex::Await
  // gave; std::mutex because Debian's Abseil is not built for ThreadSanitizer).
  std::mutex mu;
  std::condition_variable changed;
  // Unmatched operations by (sender, receiver, tag), oldest first.
  std::map<std::tuple<int, int, uint64_t>, std::deque<std::shared_ptr<Op>>> sends;
  std::map<std::tuple<int, int, uint64_t>, std::deque<std::shared_ptr<Op>>> recvs;
  std::vector<absl::Status> failure;  // per rank: first failure
  std::map<int64_t, Round> rounds;

  absl::Status Fail(int rank, absl::Status status) {
    if (failure[rank].ok()) failure[rank] = status;
    return status;
  }

  absl::Status Check(int rank, const std::string& what) {
    if (failure[rank].ok()) return absl::OkStatus();
    return absl::Status(failure[rank].code(), absl::StrCat(what,
                                                           " refused: transport failed "
                                                           "earlier: ",
                                                           failure[rank].message()));
  }

  // The first failed rank other than `self`, or -1.
  int FailedPeer(int self) {
    for (int r = 0; r < world_size; ++r) {
      if (r != self && !failure[r].ok()) return r;
    }
    return -1;
  }

  void Remove(const std::shared_ptr<Op>& op) {
    auto& queues = op->is_send ? sends : recvs;
    auto key = op->is_send ? std::make_tuple(op->owner, op->peer, op->tag)
                           : std::make_tuple(op->peer, op->owner, op->tag);
    auto it = queues.find(key);
    if (it == queues.end()) return;
    auto& queue = it->second;
    queue.erase(std::remove(queue.begin(), queue.end(), op), queue.end());
    if (queue.empty()) queues.erase(it);
  }
};

// Holds World::mu; wakes every waiter when released, since the holder may have changed what
// they wait for.
class WorldLock {
 public:
  explicit WorldLock(World& w) : world_(w), lock_(w.mu) {}
  ~WorldLock() {
    lock_.unlock();
    world_.changed.notify_all();
  }
  // Waits until `settled()` or `timeout` (finite); true if settled.
  template <typename Pred>
  bool Await(Pred settled, absl::Duration timeout) {
    return world_.changed.wait_for(lock_, absl::ToChronoNanoseconds(timeout), settled);
  }

 private:
  World& world_;
  std::unique_lock<std::mutex> lock_;
};

class FakeRequest : public Request {
 public:
  FakeRequest(std::shared_ptr<World> world, std::shared_ptr<Op> op)
      : world_(std::move(world)), op_(std::move(op)) {}

  ~FakeRequest() override {
    WorldLock lock(*world_);
    if (op_->done && op_->status.ok()) return;
    world_->Remove(op_);  // so no later match writes into a freed buffer
    if (!op_->done) {
      world_
          ->Fail(op_->owner,
                 absl::UnavailableError(op_->Describe() + " was destroyed before it completed"))
          .IgnoreError();
    }
  }

  absl::Status Wait(absl::Duration timeout) override;

 private:
  std::shared_ptr<World> world_;
  std::shared_ptr<Op> op_;
  bool finished_ = false;
  absl::Status result_;
};

absl::Status FakeRequest::Wait(absl::Duration timeout) {
  if (finished_) return result_;
  if (timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("waiting for " + op_->Describe() +
                                      ": the timeout must be finite");
  }
  World& w = *world_;
  Op& op = *op_;
  const std::string what = "waiting for " + op.Describe();
  WorldLock lock(w);
  auto settled = [&]() { return op.done || !w.failure[op.owner].ok() || !w.failure[op.peer].ok(); };
  const bool in_time = lock.Await(settled, timeout);
  absl::Status status = w.Check(op.owner, what);
  if (status.ok() && op.done) {
    status = op.status;
  } else if (status.ok() && !w.failure[op.peer].ok()) {
    status = w.Fail(op.owner, absl::UnavailableError(absl::StrCat(
                                  what, ": peer gone or connection broken: rank ", op.peer,
                                  " failed: ", w.failure[op.peer].message())));
  } else if (status.ok() && !in_time) {
    status = w.Fail(op.owner, absl::DeadlineExceededError(absl::StrCat(
                                  "timed out after ", absl::FormatDuration(timeout), " ", what)));
  }
  if (!status.ok()) w.Remove(op_);
  finished_ = true;
  result_ = status;
  return status;
}

}  // namespace fake_transport_internal

using fake_transport_internal::FakeRequest;
using fake_transport_internal::Op;
using fake_transport_internal::Round;
using fake_transport_internal::World;
using fake_transport_internal::WorldLock;

std::vector<std::unique_ptr<FakeTransport>> FakeTransport::CreateWorld(int world_size) {
  auto world = std::make_shared<World>(world_size);
  std::vector<std::unique_ptr<FakeTransport>> endpoints;
  for (int rank = 0; rank < world_size; ++rank) {
    endpoints.push_back(std::unique_ptr<FakeTransport>(new FakeTransport(world, rank)));
  }
  return endpoints;
}

FakeTransport::FakeTransport(std::shared_ptr<World> world, int rank)
    : world_(std::move(world)), rank_(rank) {}

FakeTransport::~FakeTransport() {
  // Like closing gloo connections: peers' pending operations with this rank fail.
  WorldLock lock(*world_);
  world_->Fail(rank_, absl::UnavailableError(absl::StrCat("rank ", rank_, " shut down")))
      .IgnoreError();
}

int FakeTransport::world_size() const { return world_->world_size; }

absl::StatusOr<std::unique_ptr<Request>> FakeTransport::Isend(int peer, uint64_t tag,
                                                              const float* data, size_t count) {
  // A send only reads the buffer; the shared Op type holds a mutable pointer for receives.
  return Post(/*is_send=*/true, peer, tag, const_cast<float*>(data), count);
}

absl::StatusOr<std::unique_ptr<Request>> FakeTransport::Irecv(int peer, uint64_t tag, float* data,
                                                              size_t count) {
  return Post(/*is_send=*/false, peer, tag, data, count);
}

absl::StatusOr<std::unique_ptr<Request>> FakeTransport::Post(bool is_send, int peer, uint64_t tag,
                                                             float* data, size_t count) {
  auto op = std::make_shared<Op>(Op{is_send, rank_, peer, tag, data, count});
  const std::string what = op->Describe();
  if (peer < 0 || peer >= world_size() || peer == rank_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: peer must be another rank of the %d-rank world (this is rank %d)",
                        what, world_size(), rank_));
  }
  if (!IsValidTag(tag)) return absl::InvalidArgumentError(what + ": tag was not made by MakeTag");
  if (data == nullptr && count > 0) return absl::InvalidArgumentError(what + ": null buffer");
  World& w = *world_;
  WorldLock lock(w);
  RETURN_IF_ERROR(w.Check(rank_, what));
  if (!w.failure[peer].ok()) {
    return w.Fail(rank_, absl::UnavailableError(absl::StrCat(
                             "posting ", what,
                             ": peer gone or connection broken: ", w.failure[peer].message())));
  }
  const auto key = is_send ? std::make_tuple(rank_, peer, tag) : std::make_tuple(peer, rank_, tag);
  auto& mine = is_send ? w.sends : w.recvs;
  auto& theirs = is_send ? w.recvs : w.sends;
  auto it = theirs.find(key);
  if (it == theirs.end()) {
    mine[key].push_back(op);
  } else {
    std::shared_ptr<Op> other = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) theirs.erase(it);
    Op& send = is_send ? *op : *other;
    Op& recv = is_send ? *other : *op;
    if (send.count != recv.count) {
      send.status = recv.status = absl::InvalidArgumentError(absl::StrFormat(
          "%s: the send has %d floats, the receive expects %d", what, send.count, recv.count));
    } else if (send.count > 0) {
      std::memcpy(recv.data, send.data, send.count * sizeof(float));
    }
    send.done = recv.done = true;
  }
  return std::unique_ptr<Request>(new FakeRequest(world_, op));
}

template <typename T>
absl::Status FakeTransport::AllReduceImpl(T* data, size_t count, absl::Duration timeout,
                                          const char* what_c) {
  const std::string what(what_c);
  if (timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(what + ": the timeout must be finite");
  }
  const int n = world_size();
  const int64_t seq = num_collectives_++;
  World& w = *world_;
  WorldLock lock(w);
  RETURN_IF_ERROR(w.Check(rank_, what));
  Round& round = w.rounds[seq];  // std::map: the reference survives other insertions
  if (round.arrived.empty()) {
    round.arrived.assign(n, false);
    round.inputs.resize(n);
    round.count = count;
  }
  round.inputs[rank_].assign(data, data + count);
  round.arrived[rank_] = true;
  if (++round.num_arrived == n) {
    for (int r = 0; r < n; ++r) {
      if (round.inputs[r].size() != round.count) {
        round.status = absl::InvalidArgumentError(
            absl::StrFormat("%s: ranks disagree on the element count", what));
      }
    }
    // Accumulate in T, in rank order: deterministic, and float sums round like floats.
    round.result.assign(count, 0.0);
    for (size_t i = 0; round.status.ok() && i < count; ++i) {
      T sum = 0;
      for (int r = 0; r < n; ++r) sum += static_cast<T>(round.inputs[r][i]);
      round.result[i] = sum;
    }
  }
  auto settled = [&]() {
    return round.num_arrived == n || !w.failure[rank_].ok() || w.FailedPeer(rank_) >= 0;
  };
  const bool in_time = lock.Await(settled, timeout);
  absl::Status status = w.Check(rank_, what);
  if (status.ok() && round.num_arrived == n) {
    status = round.status;
    for (size_t i = 0; status.ok() && i < count; ++i) data[i] = static_cast<T>(round.result[i]);
  } else if (status.ok() && w.FailedPeer(rank_) >= 0) {
    const int peer = w.FailedPeer(rank_);
    status = w.Fail(
        rank_, absl::UnavailableError(absl::StrCat(what, ": peer gone or connection broken: rank ",
                                                   peer, " failed: ", w.failure[peer].message())));
  } else if (status.ok() && !in_time) {
    std::vector<int> missing;
    for (int r = 0; r < n; ++r) {
      if (!round.arrived[r]) missing.push_back(r);
    }
    status = w.Fail(rank_, absl::DeadlineExceededError(absl::StrCat(
                               "timed out after ", absl::FormatDuration(timeout), " ", what,
                               " (ranks not arrived: ", absl::StrJoin(missing, ", "), ")")));
  }
  if (++round.num_departed == n) w.rounds.erase(seq);
  return status;
}

absl::Status FakeTransport::AllReduceSum(double* data, size_t count, absl::Duration timeout) {
  const std::string what =
      absl::StrFormat("waiting for all-reduce of %d doubles over %d ranks", count, world_size());
  return AllReduceImpl(data, count, timeout, what.c_str());
}

absl::Status FakeTransport::AllReduceSum(float* data, size_t count, absl::Duration timeout) {
  const std::string what =
      absl::StrFormat("waiting for all-reduce of %d floats over %d ranks", count, world_size());
  return AllReduceImpl(data, count, timeout, what.c_str());
}

absl::Status FakeTransport::Barrier(absl::Duration timeout) {
  const std::string what = absl::StrFormat("waiting for barrier of %d ranks", world_size());
  return AllReduceImpl<double>(nullptr, 0, timeout, what.c_str());
}

void FakeTransport::Abort() {
  WorldLock lock(*world_);
  world_->Fail(rank_, absl::AbortedError(absl::StrFormat("Abort() was called on rank %d", rank_)))
      .IgnoreError();
}

}  // namespace xhc
