#include "runtime/transport/gloo_transport.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "runtime/common/log.h"
#include "runtime/transport/gloo_kv_store_adapter.h"
#include "runtime/transport/peer_memory.h"
#include "runtime/transport/pull_receiver.h"

namespace xhc {

// A request registered with its transport for its whole life, so that Abort() can wake a
// Wait that is blocked.
class GlooRequestBase : public Request {
 public:
  // Called by Abort() with the registry lock held; a Wait that starts after it returns at once.
  virtual void AbortWait() = 0;
};

// One posted gloo operation: a TCP send or receive, or the sending end of a same-host
// message (a descriptor sent, its acknowledgement received; pull_receiver.h).
class GlooRequest : public GlooRequestBase {
 public:
  GlooRequest(GlooTransport* transport, std::unique_ptr<gloo::transport::UnboundBuffer> buffer,
              bool is_send, int peer, uint64_t tag)
      : transport_(transport),
        buffer_(std::move(buffer)),
        is_send_(is_send),
        peer_(peer),
        tag_(tag) {
    transport_->Register(this);
  }

  ~GlooRequest() override {
    // The post thread must be done with this request (or never start it) before it goes.
    if (post_id_ != 0) transport_->poster_.CancelOrAwait(post_id_);
    transport_->Unregister(this);
    if (!(finished_ && result_.ok())) transport_->FailAbandoned(Describe());
  }

  absl::Status Wait(absl::Duration timeout) override;

  void Finish(absl::Status status) {
    finished_ = true;
    result_ = std::move(status);
  }

  // The flag it sets holds until a wait sees it, so a Wait that enters gloo after this
  // still returns at once.
  void AbortWait() override {
    if (buffer_ == nullptr) return;  // a same-host send not posted yet (PostPullSend)
    if (is_send_) {
      buffer_->abortWaitSend();
    } else {
      buffer_->abortWaitRecv();
    }
    if (ack_ != nullptr) ack_->abortWaitRecv();
  }

  std::string Describe() const {
    return absl::StrFormat("%s rank %d (%s)", is_send_ ? "send to" : "recv from", peer_,
                           TagToString(tag_));
  }

  // Hands the gloo post to the transport's post thread (post_thread.h).
  void QueuePost() {
    post_id_ = transport_->poster_.Queue([this] { PostNow(); });
  }

  // Makes this a same-host send of data[0, bytes) (before QueuePost).
  void SetPullSend(const float* data, size_t bytes) {
    pull_data_ = data;
    pull_bytes_ = bytes;
  }

 private:
  // A same-host send, on the post thread (a post takes the connection's lock:
  // docs/design/transport-post-thread.md): the acknowledgement's receive is posted before the
  // descriptor goes, so the receiver's answer always finds it. Both are small; the payload is never
  // written. Throws what gloo throws.
  void PostPullSend(const float* data, size_t bytes, uint64_t seq) {
    descriptor_ = {tag_, seq, reinterpret_cast<uint64_t>(data), bytes};
    std::unique_ptr<gloo::transport::UnboundBuffer> ack =
        transport_->context_->createUnboundBuffer(&ack_word_, sizeof(ack_word_));
    ack->recv(peer_, PullAckSlot(seq));
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
        transport_->context_->createUnboundBuffer(&descriptor_, sizeof(descriptor_));
    buffer->send(peer_, kPullDescriptorSlot);
    std::lock_guard<std::mutex> lock(transport_->requests_mu_);
    ack_ = std::move(ack);  // AbortWait reads both under this lock
    buffer_ = std::move(buffer);
    if (transport_->aborted_.load()) AbortWait();
  }

  // On the post thread. post_status_ is read by Wait only after AwaitDone saw this finish.
  void PostNow() {
    if (transport_->latch_.failed()) {
      post_status_ = transport_->latch_.Check("posting " + Describe());
      return;
    }
    try {
      if (pull_data_ != nullptr) {
        // The post thread numbers the descriptors to each peer in the order it sends them.
        PostPullSend(pull_data_, pull_bytes_, transport_->next_seq_[peer_]++);
      } else if (is_send_) {
        buffer_->send(peer_, tag_);
      } else {
        buffer_->recv(peer_, tag_);
      }
    } catch (const std::exception& e) {
      post_status_ = transport_->Fail(
          transport_->StatusFromGloo(e.what(), absl::ZeroDuration(), "posting " + Describe()));
    }
  }

  GlooTransport* const transport_;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer_;
  const bool is_send_;
  const int peer_;
  const uint64_t tag_;
  bool finished_ = false;
  absl::Status result_;
  PostThread::Id post_id_ = 0;  // the post's job on the post thread (0: not queued)
  absl::Status post_status_;
  // A same-host send: its payload, what the descriptor says, and the acknowledgement's receive.
  const float* pull_data_ = nullptr;
  size_t pull_bytes_ = 0;
  PullDescriptor descriptor_;
  uint64_t ack_word_ = 0;
  std::unique_ptr<gloo::transport::UnboundBuffer> ack_;
};

// The receiving end of a same-host message: registered with the peer's PullReceiver, which
// copies into the caller's buffer as soon as the sender's descriptor is there.
class GlooPullRecv : public GlooRequestBase {
 public:
  GlooPullRecv(GlooTransport* transport, PullReceiver* receiver, uint64_t tag, float* data,
               size_t bytes)
      : transport_(transport), receiver_(receiver) {
    pending_.tag = tag;
    pending_.dst = data;
    pending_.bytes = bytes;
    transport_->Register(this);
    receiver_->Post(&pending_);
  }

  ~GlooPullRecv() override {
    receiver_->Remove(&pending_);  // nothing writes into the caller's buffer after this
    transport_->Unregister(this);
    if (!(finished_ && result_.ok())) transport_->FailAbandoned(Describe());
  }

  absl::Status Wait(absl::Duration timeout) override {
    if (finished_) return result_;
    const std::string what = "waiting for " + Describe();
    if (timeout == absl::InfiniteDuration()) return ToGlooTimeout(timeout, what).status();
    absl::Status status;
    if (!receiver_->Await(&pending_, absl::Now() + timeout)) {
      status = transport_->latch_.failed()
                   ? transport_->latch_.Check(what)
                   : transport_->Fail(absl::DeadlineExceededError(absl::StrCat(
                         "timed out after ", absl::FormatDuration(timeout), " ", what)));
    } else if (!pending_.status.ok()) {
      // As a TCP receive that fails: the transport fails, and the error names this wait.
      status = transport_->Fail(absl::Status(pending_.status.code(),
                                             absl::StrCat(what, ": ", pending_.status.message())));
    }
    finished_ = true;
    result_ = status;
    return status;
  }

  void AbortWait() override { receiver_->Abort(&pending_); }

  absl::Duration PostCopyTime() const override { return pending_.post_copy; }

 private:
  std::string Describe() const {
    return absl::StrFormat("recv from rank %d (%s, same-host path)", receiver_->peer(),
                           TagToString(pending_.tag));
  }

  GlooTransport* const transport_;
  PullReceiver* const receiver_;
  PullReceiver::Pending pending_;
  bool finished_ = false;
  absl::Status result_;
};

absl::Status GlooRequest::Wait(absl::Duration timeout) {
  if (finished_) return result_;
  // Messages are built only on failure: Wait is on the per-message hot path.
  auto what = [this] { return "waiting for " + Describe(); };
  if (timeout == absl::InfiniteDuration()) {
    return ToGlooTimeout(timeout, what()).status();  // a caller bug; the op stays pending
  }
  absl::Status status;
  const absl::Time deadline = absl::Now() + timeout;
  if (post_id_ != 0) {  // its post first, within the same deadline
    if (!transport_->poster_.AwaitDone(post_id_, deadline)) {
      status = transport_->latch_.failed()
                   ? transport_->latch_.Check(what())
                   : transport_->Fail(absl::DeadlineExceededError(
                         absl::StrCat("timed out after ", absl::FormatDuration(timeout), " ",
                                      what(), " (it was never posted)")));
      Finish(status);
      return status;
    }
    if (!post_status_.ok()) {
      Finish(post_status_);
      return post_status_;
    }
    timeout = deadline - absl::Now();
  }
  const std::chrono::milliseconds gloo_timeout = *ToGlooTimeout(timeout, "");
  if (transport_->latch_.failed()) {
    status = transport_->latch_.Check(what());
    Finish(status);
    return status;
  }
  try {
    bool completed = is_send_ ? buffer_->waitSend(nullptr, gloo_timeout)
                              : buffer_->waitRecv(nullptr, gloo_timeout);
    // A same-host send is done once the receiver has copied it and said so.
    if (completed && ack_ != nullptr) {
      completed = ack_->waitRecv(nullptr, *ToGlooTimeout(deadline - absl::Now(), ""));
    }
    // Only Abort() interrupts a wait without an exception.
    status = completed
                 ? absl::OkStatus()
                 : transport_->Fail(absl::AbortedError(what() + " aborted: Abort() was called"));
  } catch (const std::exception& e) {
    status = transport_->Fail(transport_->StatusFromGloo(e.what(), timeout, what()));
  }
  Finish(status);
  return status;
}

absl::StatusOr<std::chrono::milliseconds> ToGlooTimeout(absl::Duration timeout,
                                                        const std::string& what) {
  if (timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(what + ": the timeout must be finite");
  }
  if (timeout < absl::ZeroDuration()) timeout = absl::ZeroDuration();
  return std::chrono::milliseconds(
      absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1))));
}

namespace {

// gloo's TCP pairs write with writev, and a write to a connection the peer has reset (a peer
// that died, or was fenced out, while this rank still sends to it) raises SIGPIPE, whose
// default action ends the process without a word. Ignored, the write fails with EPIPE and
// gloo's exception reaches the caller as an error naming the peer. The disposition is the
// whole process's: a handler someone else installed is left alone.
void IgnoreSigpipeUnlessHandled() {
  struct sigaction current = {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooTransport>> GlooTransport::Create(
    const GlooTransportOptions& options, KvStore* store) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "GlooTransport: rank %d is not in a world of %d", options.rank, options.world_size));
  }
  const std::string what =
      absl::StrFormat("rendezvous of rank %d of %d on %s (store prefix '%s')", options.rank,
                      options.world_size, options.hostname, options.store_prefix);
  ASSIGN_OR_RETURN(std::chrono::milliseconds timeout, ToGlooTimeout(options.connect_timeout, what));
  IgnoreSigpipeUnlessHandled();
  GlooKvStoreAdapter adapter(store, options.store_prefix, options.connect_timeout);
  try {
    gloo::transport::tcp::attr attr(options.hostname.c_str());
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(timeout);
    context->connectFullMesh(adapter, device);
    auto transport = std::unique_ptr<GlooTransport>(
        new GlooTransport(options.rank, options.world_size, std::move(context)));
    const char* env = std::getenv("XHC_SAME_HOST_COPY");
    const bool enabled = options.same_host_copy && !(env != nullptr && std::strcmp(env, "0") == 0);
    absl::Status probed = transport->ProbeSameHost(enabled, options.connect_timeout);
    if (!probed.ok()) {
      return absl::Status(probed.code(), absl::StrCat(what, ": ", probed.message()));
    }
    return transport;
  } catch (const std::exception& e) {
    const absl::Status store_error = adapter.first_error();
    if (!store_error.ok()) {
      return absl::Status(store_error.code(), absl::StrCat(what, ": ", store_error.message()));
    }
    return absl::UnavailableError(absl::StrCat(what, " failed to connect: ", e.what()));
  }
}

GlooTransport::GlooTransport(int rank, int world_size, std::shared_ptr<gloo::Context> context)
    : rank_(rank),
      world_size_(world_size),
      context_(std::move(context)),
      pullers_(world_size),
      pulled_by_(world_size, false),
      next_seq_(world_size, 0) {}

absl::Status GlooTransport::ProbeSameHost(bool enabled, absl::Duration timeout) {
  if (world_size_ == 1) return absl::OkStatus();
  static_assert(std::atomic<uint64_t>::is_always_lock_free);  // its bytes are the word
  uint64_t nonce = RandomNonce();
  probe_nonce_.store(nonce);
  PeerMemoryOffer mine = MakePeerMemoryOffer(&nonce, enabled);
  mine.nonce_addr = reinterpret_cast<uint64_t>(&probe_nonce_);
  std::vector<PeerMemoryOffer> theirs(world_size_);
  std::vector<uint64_t> can_read(world_size_, 0), read_by(world_size_, 0);
  const std::chrono::milliseconds gloo_timeout = *ToGlooTimeout(timeout, "");
  // Two rounds with every peer: the offers, then each side's verdict on the other's.
  auto exchange = [&](auto* out, auto* in, size_t bytes, uint64_t slot) {
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
    for (int peer = 0; peer < world_size_; ++peer) {
      if (peer == rank_) continue;
      recvs.push_back(context_->createUnboundBuffer(in + peer, bytes));
      recvs.back()->recv(peer, slot);
      sends.push_back(context_->createUnboundBuffer(
          const_cast<void*>(static_cast<const void*>(out + peer)), bytes));
      sends.back()->send(peer, slot);
    }
    for (auto& b : recvs) b->waitRecv(nullptr, gloo_timeout);
    for (auto& b : sends) b->waitSend(nullptr, gloo_timeout);
  };
  try {
    const std::vector<PeerMemoryOffer> offers(world_size_, mine);
    exchange(offers.data(), theirs.data(), sizeof(PeerMemoryOffer), kPeerProbeSlot);
    for (int peer = 0; peer < world_size_; ++peer) {
      can_read[peer] = peer != rank_ && CanReadPeer(theirs[peer], enabled) ? 1 : 0;
    }
    exchange(can_read.data(), read_by.data(), sizeof(uint64_t), kPeerProbeSlot + 1);
  } catch (const std::exception& e) {
    return Fail(absl::UnavailableError(
        absl::StrCat("the same-host probe failed (a peer gone?): ", e.what())));
  }
  std::string from, to;
  for (int peer = 0; peer < world_size_; ++peer) {
    pulled_by_[peer] = read_by[peer] == 1;
    if (pulled_by_[peer]) absl::StrAppend(&to, to.empty() ? "" : ",", peer);
    if (can_read[peer] != 1) continue;
    absl::StrAppend(&from, from.empty() ? "" : ",", peer);
    pullers_[peer] = std::make_unique<PullReceiver>(
        context_, peer, static_cast<pid_t>(theirs[peer].pid), theirs[peer].nonce_addr,
        theirs[peer].nonce,
        [this](const char* message, const std::string& what) {
          return StatusFromGloo(message, absl::ZeroDuration(), what);
        },
        [this](absl::Status status) { return Fail(std::move(status)); });
  }
  LogInfo("transport: rank %d: same-host copy %s; from ranks [%s], to ranks [%s]", rank_,
          enabled ? "on" : "off (XHC_SAME_HOST_COPY=0 or options)", from, to);
  return absl::OkStatus();
}

bool GlooTransport::SameHostFrom(int peer) const {
  return peer >= 0 && peer < world_size_ && pullers_[peer] != nullptr;
}

bool GlooTransport::SameHostTo(int peer) const {
  return peer >= 0 && peer < world_size_ && pulled_by_[peer];
}

uint64_t GlooTransport::same_host_received() const {
  uint64_t total = 0;
  for (const auto& puller : pullers_) total += puller != nullptr ? puller->pulled() : 0;
  return total;
}

GlooTransport::~GlooTransport() {
  probe_nonce_.store(0);
  std::lock_guard<std::mutex> lock(requests_mu_);
  if (!requests_.empty()) {
    LogError("transport: destroyed with %d live requests (they must be destroyed first)",
             static_cast<int>(requests_.size()));
  }
}

void GlooTransport::Register(GlooRequestBase* request) {
  std::lock_guard<std::mutex> lock(requests_mu_);
  requests_.insert(request);
  // Abort() may have run between the caller's health check and this registration.
  if (aborted_.load()) request->AbortWait();
}

void GlooTransport::Unregister(GlooRequestBase* request) {
  std::lock_guard<std::mutex> lock(requests_mu_);
  requests_.erase(request);
}

absl::StatusOr<std::unique_ptr<Request>> GlooTransport::Isend(int peer, uint64_t tag,
                                                              const float* data, size_t count) {
  // gloo's buffer type is not const-qualified; a send only reads it.
  return Post(/*is_send=*/true, peer, tag, const_cast<float*>(data), count);
}

absl::StatusOr<std::unique_ptr<Request>> GlooTransport::Irecv(int peer, uint64_t tag, float* data,
                                                              size_t count) {
  return Post(/*is_send=*/false, peer, tag, data, count);
}

absl::StatusOr<std::unique_ptr<Request>> GlooTransport::Post(bool is_send, int peer, uint64_t tag,
                                                             float* data, size_t count) {
  // Built eagerly: Post is cheap next to the payload, and most branches below need it.
  const std::string what =
      absl::StrFormat("%s rank %d (%s)", is_send ? "send to" : "recv from", peer, TagToString(tag));
  if (peer < 0 || peer >= world_size_ || peer == rank_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: peer must be another rank of the %d-rank world (this is rank %d)",
                        what, world_size_, rank_));
  }
  if (!IsValidTag(tag)) {
    return absl::InvalidArgumentError(what + ": tag was not made by MakeTag");
  }
  if (data == nullptr && count > 0) return absl::InvalidArgumentError(what + ": null buffer");
  RETURN_IF_ERROR(latch_.Check(what));
  const size_t bytes = count * sizeof(float);
  if (bytes >= kPullMinBytes && !is_send && pullers_[peer] != nullptr) {
    return std::unique_ptr<Request>(
        std::make_unique<GlooPullRecv>(this, pullers_[peer].get(), tag, data, bytes));
  }
  if (bytes >= kPullMinBytes && is_send && pulled_by_[peer]) {
    auto request = std::make_unique<GlooRequest>(this, nullptr, true, peer, tag);
    request->SetPullSend(data, bytes);
    request->QueuePost();
    return std::unique_ptr<Request>(std::move(request));
  }
  static float empty_payload = 0.0f;  // gloo wants a valid pointer even for zero bytes
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
      context_->createUnboundBuffer(count > 0 ? data : &empty_payload, count * sizeof(float));
  auto request = std::make_unique<GlooRequest>(this, std::move(buffer), is_send, peer, tag);
  // Receives too: posting one takes the connection's lock, which gloo's event loop holds
  // while it reads a payload off that connection and the post thread while it writes one,
  // so on the caller's thread a receive post waits for whole transfers
  // (docs/design/transport-post-thread.md).
  request->QueuePost();
  return std::unique_ptr<Request>(std::move(request));
}

template <typename T>
absl::Status GlooTransport::AllReduceImpl(T* data, size_t count, absl::Duration timeout,
                                          const char* type_name) {
  const std::string what = absl::StrFormat("waiting for all-reduce of %d %ss over %d ranks", count,
                                           type_name, world_size_);
  ASSIGN_OR_RETURN(std::chrono::milliseconds gloo_timeout, ToGlooTimeout(timeout, what));
  RETURN_IF_ERROR(latch_.Check(what));
  if (count == 0 || world_size_ == 1) return absl::OkStatus();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, count);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
    // Collectives are serialized per transport, so one tag suffices; their slots carry
    // gloo's collective prefix byte and cannot collide with point-to-point tags.
    opts.setTag(0);
    opts.setTimeout(gloo_timeout);
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return Fail(StatusFromGloo(e.what(), timeout, what));
  }
  return absl::OkStatus();
}

absl::Status GlooTransport::AllReduceSum(double* data, size_t count, absl::Duration timeout) {
  return AllReduceImpl(data, count, timeout, "double");
}

absl::Status GlooTransport::AllReduceSum(float* data, size_t count, absl::Duration timeout) {
  return AllReduceImpl(data, count, timeout, "float");
}

absl::Status GlooTransport::Barrier(absl::Duration timeout) {
  const std::string what = absl::StrFormat("waiting for barrier of %d ranks", world_size_);
  ASSIGN_OR_RETURN(std::chrono::milliseconds gloo_timeout, ToGlooTimeout(timeout, what));
  RETURN_IF_ERROR(latch_.Check(what));
  if (world_size_ == 1) return absl::OkStatus();
  try {
    gloo::BarrierOptions opts(context_);
    opts.setTag(0);
    opts.setTimeout(gloo_timeout);
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    return Fail(StatusFromGloo(e.what(), timeout, what));
  }
  return absl::OkStatus();
}

void GlooTransport::Abort() {
  probe_nonce_.store(0);  // first: see probe_nonce_
  aborted_.store(true);
  latch_.Record(absl::AbortedError(absl::StrFormat("Abort() was called on rank %d", rank_)));
  poster_.Interrupt();  // after the record: a send's Wait it wakes reports this failure
  CloseEngine();
  std::lock_guard<std::mutex> lock(requests_mu_);
  for (GlooRequestBase* request : requests_) request->AbortWait();
}

absl::Status GlooTransport::StatusFromGloo(const char* message, absl::Duration timeout,
                                           const std::string& what) const {
  if (aborted_.load()) {
    return absl::AbortedError(absl::StrCat(what, ": aborted (Abort() was called)"));
  }
  // The exact text of tcp::UnboundBuffer::waitRecv/waitSend when their own deadline passes;
  // every other I/O exception means a connection broke (peer gone, or an earlier failure).
  if (absl::StrContains(message, "Timed out waiting")) {
    return absl::DeadlineExceededError(absl::StrCat(
        "timed out after ", absl::FormatDuration(timeout), " ", what, " [", message, "]"));
  }
  return absl::UnavailableError(absl::StrCat(what, ": peer gone or connection broken: ", message));
}

void GlooTransport::FailAbandoned(const std::string& request) {
  if (latch_.failed()) return;
  // gloo (or a same-host copy) may still write into or read from the caller's buffer;
  // closing the engine is the only way to guarantee it will not.
  LogError("transport: %s destroyed before completion; failing the transport", request);
  Fail(absl::UnavailableError(absl::StrCat(request, " was destroyed before it completed")))
      .IgnoreError();
}

absl::Status GlooTransport::Fail(absl::Status status) {
  probe_nonce_.store(0);  // first: see probe_nonce_
  latch_.Record(status);
  CloseEngine();
  return status;
}

void GlooTransport::CloseEngine() {
  // gloo (2022) has no public call that fails every pending operation of a context, but an
  // expired wait does exactly that (tcp::UnboundBuffer::waitRecv signals every pair, which
  // fails their pending operations and closes the sockets). A zero-timeout wait on an idle
  // buffer is therefore the teardown switch; the exception it throws is expected.
  float unused = 0.0f;
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
      context_->createUnboundBuffer(&unused, sizeof(unused));
  try {
    buffer->waitRecv(nullptr, std::chrono::milliseconds(0));
  } catch (const std::exception&) {
  }
}

}  // namespace xhc
