#include "runtime/transport/gloo_transport.h"

#include <signal.h>

#include <exception>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/common/error.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "runtime/common/log.h"
#include "base/status_macros.h"
#include "runtime/transport/gloo_kv_store_adapter.h"

namespace xhc {

// One posted gloo operation. Registered with its transport for its whole life so that
// Abort() can wake a Wait that is blocked inside gloo.
class GlooRequest : public Request {
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
    if (!(finished_ && result_.ok()) && !transport_->latch_.failed()) {
      // gloo may still write into (or read from) the caller's buffer; closing the engine is
      // the only way to guarantee it will not.
      LogError("transport: %s destroyed before completion; failing the transport", Describe());
      transport_
          ->Fail(absl::UnavailableError(
              absl::StrCat(Describe(), " was destroyed before it completed")))
          .IgnoreError();
    }
  }

  absl::Status Wait(absl::Duration timeout) override;

  void Finish(absl::Status status) {
    finished_ = true;
    result_ = std::move(status);
  }

  // Called by Abort() with the registry lock held; the flag it sets is sticky, so a Wait
  // that enters gloo after this still returns at once.
  void AbortWait() {
    if (is_send_) {
      buffer_->abortWaitSend();
    } else {
      buffer_->abortWaitRecv();
    }
  }

  std::string Describe() const {
    return absl::StrFormat("%s rank %d (%s)", is_send_ ? "send to" : "recv from", peer_,
                           TagToString(tag_));
  }

  // Hands the gloo post to the transport's post thread (post_thread.h).
  void QueuePost() {
    post_id_ = transport_->poster_.Queue([this] { PostNow(); });
  }

 private:
  // On the post thread. post_status_ is read by Wait only after AwaitDone saw this finish.
  void PostNow() {
    if (transport_->latch_.failed()) {
      post_status_ = transport_->latch_.Check("posting " + Describe());
      return;
    }
    try {
      if (is_send_) {
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
};

absl::Status GlooRequest::Wait(absl::Duration timeout) {
  if (finished_) return result_;
  // Messages are built only on failure: Wait is on the per-message hot path.
  auto what = [this] { return "waiting for " + Describe(); };
  if (timeout == absl::InfiniteDuration()) {
    return ToGlooTimeout(timeout, what()).status();  // a caller bug; the op stays pending
  }
  absl::Status status;
  if (post_id_ != 0) {  // its post first, within the same deadline
    const absl::Time deadline = absl::Now() + timeout;
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
    const bool completed = is_send_ ? buffer_->waitSend(nullptr, gloo_timeout)
                                    : buffer_->waitRecv(nullptr, gloo_timeout);
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
    return std::unique_ptr<GlooTransport>(
        new GlooTransport(options.rank, options.world_size, std::move(context)));
  } catch (const std::exception& e) {
    const absl::Status store_error = adapter.first_error();
    if (!store_error.ok()) {
      return absl::Status(store_error.code(), absl::StrCat(what, ": ", store_error.message()));
    }
    return absl::UnavailableError(absl::StrCat(what, " failed to connect: ", e.what()));
  }
}

GlooTransport::GlooTransport(int rank, int world_size, std::shared_ptr<gloo::Context> context)
    : rank_(rank), world_size_(world_size), context_(std::move(context)) {}

GlooTransport::~GlooTransport() {
  std::lock_guard<std::mutex> lock(requests_mu_);
  if (!requests_.empty()) {
    LogError("transport: destroyed with %d live requests (they must be destroyed first)",
             static_cast<int>(requests_.size()));
  }
}

void GlooTransport::Register(GlooRequest* request) {
  std::lock_guard<std::mutex> lock(requests_mu_);
  requests_.insert(request);
  // Abort() may have run between the caller's health check and this registration.
  if (aborted_.load()) request->AbortWait();
}

void GlooTransport::Unregister(GlooRequest* request) {
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
  static float empty_payload = 0.0f;  // gloo wants a valid pointer even for zero bytes
  std::unique_ptr<gloo::transport::UnboundBuffer> buffer =
      context_->createUnboundBuffer(count > 0 ? data : &empty_payload, count * sizeof(float));
  auto request = std::make_unique<GlooRequest>(this, std::move(buffer), is_send, peer, tag);
  // Receives too: posting one takes the connection's lock, which gloo's event loop holds
  // while it reads a payload off that connection and the post thread while it writes one,
  // so on the caller's thread a receive post waited for whole transfers (PERF.md 124).
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
  aborted_.store(true);
  latch_.Record(absl::AbortedError(absl::StrFormat("Abort() was called on rank %d", rank_)));
  poster_.Interrupt();  // after the record: a send's Wait it wakes reports this failure
  CloseEngine();
  std::lock_guard<std::mutex> lock(requests_mu_);
  for (GlooRequest* request : requests_) request->AbortWait();
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

absl::Status GlooTransport::Fail(absl::Status status) {
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
