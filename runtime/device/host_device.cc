#include "runtime/device/host_device.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <new>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace xhc::device {
namespace {

using Clock = std::chrono::steady_clock;

// splitmix64's finaliser: well-separated generator seeds for neighbouring stream indices.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A deadline `timeout` from now that cannot overflow the clock (InfiniteDuration included).
Clock::time_point DeadlineAfter(absl::Duration timeout) {
  constexpr absl::Duration kFar = absl::Hours(24 * 365);
  return Clock::now() +
         absl::ToChronoNanoseconds(std::min(std::max(timeout, absl::ZeroDuration()), kFar));
}

// An event's records. Shared with the record and wait ops queued on streams, so the Event
// may be destroyed before they run. Generation g is the g-th RecordEvent; a wait or
// synchronize refers to the generation that was latest when it was called.
struct EventState {
  std::mutex mu;
  std::condition_variable completed;
  uint64_t latest = 0;            // generations recorded so far; 0: never recorded
  std::set<uint64_t> pending;     // recorded, their stream not there yet
  Clock::time_point latest_time;  // when `latest` completed (valid once it has)

  bool DoneLocked(uint64_t generation) const { return pending.count(generation) == 0; }
};

}  // namespace

class HostDevice::HostEvent final : public Event {
 public:
  HostEvent(const Device* device, std::string name)
      : Event(device, std::move(name)), state_(std::make_shared<EventState>()) {}
  const std::shared_ptr<EventState>& state() const { return state_; }

 private:
  std::shared_ptr<EventState> state_;
};

class HostDevice::HostStream final : public Stream {
 public:
  HostStream(HostDevice* device, std::string name, DelayRange delay, uint64_t seed)
      : Stream(device, std::move(name)), device_(device), delay_(delay), rng_(seed) {
    thread_ = std::thread([this] { Loop(); });
  }

  // Lets the queued ops run, then joins.
  ~HostStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    queued_.notify_one();
    thread_.join();
    std::lock_guard<std::mutex> lock(device_->mu_);
    --device_->live_streams_;
  }

  void Enqueue(std::function<void()> op) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(op));
      ++num_enqueued_;
    }
    queued_.notify_one();
  }

  // True once every op enqueued before the call has run; false at `deadline`, with the
  // number still to run in `*left`.
  bool AwaitIdle(Clock::time_point deadline, uint64_t* left) {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = num_enqueued_;
    const bool done = ran_.wait_until(lock, deadline, [&] { return num_done_ >= target; });
    *left = target - num_done_;
    return done;
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock<std::mutex> lock(mu_);
        queued_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and drained
        op = std::move(queue_.front());
        queue_.pop_front();
      }
      Delay();
      op();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++num_done_;
      }
      ran_.notify_all();
    }
  }

  // Draws on this thread alone, in the stream's op order: the sequence depends on the seed.
  void Delay() {
    if (delay_.max_us <= 0) return;
    std::uniform_int_distribution<int64_t> us(delay_.min_us, delay_.max_us);
    std::this_thread::sleep_for(std::chrono::microseconds(us(rng_)));
  }

  HostDevice* const device_;
  const DelayRange delay_;
  std::mt19937_64 rng_;  // the stream's thread only
  std::mutex mu_;
  std::condition_variable queued_;            // an op was queued, or stop_
  std::condition_variable ran_;               // an op finished
  std::deque<std::function<void()>> queue_;   // guarded by mu_
  uint64_t num_enqueued_ = 0, num_done_ = 0;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::thread thread_;                        // last: started once everything above is built
};

HostDevice::HostDevice(HostDeviceOptions options) : options_(std::move(options)) {}

HostDevice::~HostDevice() {
  std::lock_guard<std::mutex> lock(mu_);
  if (live_streams_ != 0 || live_buffers_ != 0) {
    // Their threads and destructors would reach a destroyed device: stop here, loudly.
    std::fprintf(stderr, "HostDevice destroyed with %d stream(s) and %d buffer(s) still alive\n",
                 live_streams_, live_buffers_);
    std::abort();
  }
}

absl::StatusOr<DeviceBuffer> HostDevice::Allocate(size_t bytes, MemoryKind kind) {
  const char* what = MemoryKindName(kind);
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate: 0 bytes of ", what, " memory"));
  }
  if (bytes > kMaxAllocationBytes) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate: ", bytes, " bytes of ", what,
                                                   " memory is beyond any device (at most ",
                                                   kMaxAllocationBytes, ")"));
  }
  {
    // Reserved before the allocation, so that concurrent callers cannot both pass the limit.
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) {
      return absl::Status(failure_.code(), absl::StrCat("Allocate refused: device host failed "
                                                        "earlier: ",
                                                        failure_.message()));
    }
    if (kind == MemoryKind::kDevice && options_.memory_limit_bytes > 0 &&
        bytes > options_.memory_limit_bytes - device_bytes_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "Allocate: ", bytes, " bytes of device memory requested, ",
          options_.memory_limit_bytes - device_bytes_, " bytes available (limit ",
          options_.memory_limit_bytes, ", ", device_bytes_, " in use); nothing allocated"));
    }
    (kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_) += bytes;
    ++live_buffers_;
  }
  void* data = ::operator new(bytes, std::align_val_t(DeviceBuffer::kAlignment), std::nothrow);
  if (data == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    (kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_) -= bytes;
    --live_buffers_;
    return absl::ResourceExhaustedError(
        absl::StrCat("Allocate: the host refused ", bytes, " bytes of ", what, " memory"));
  }
  return WrapBuffer(data, bytes, kind);
}

void HostDevice::Free(void* data, size_t bytes, MemoryKind kind) {
  ::operator delete(data, std::align_val_t(DeviceBuffer::kAlignment));
  std::lock_guard<std::mutex> lock(mu_);
  (kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_) -= bytes;
  --live_buffers_;
}

size_t HostDevice::BytesInUse(MemoryKind kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  return kind == MemoryKind::kDevice ? device_bytes_ : host_bytes_;
}

absl::StatusOr<std::unique_ptr<Stream>> HostDevice::NewStream(const std::string& name) {
  RETURN_IF_ERROR(CheckHealthy(absl::StrCat("NewStream(", name, ")")));
  DelayRange delay{0, options_.max_delay_us};
  if (auto it = options_.stream_delays.find(name); it != options_.stream_delays.end()) {
    delay = it->second;
  }
  if (delay.min_us < 0 || delay.max_us < delay.min_us) {
    return absl::InvalidArgumentError(absl::StrCat("NewStream(", name, "): delay range [",
                                                   delay.min_us, ", ", delay.max_us,
                                                   "] us is not a range"));
  }
  int index;
  {
    std::lock_guard<std::mutex> lock(mu_);
    index = num_streams_++;
    ++live_streams_;
  }
  return std::unique_ptr<Stream>(std::make_unique<HostStream>(
      this, std::string(name), delay, Mix(options_.seed ^ Mix(static_cast<uint64_t>(index)))));
}

absl::StatusOr<std::unique_ptr<Event>> HostDevice::NewEvent(const std::string& name) {
  RETURN_IF_ERROR(CheckHealthy(absl::StrCat("NewEvent(", name, ")")));
  return std::unique_ptr<Event>(std::make_unique<HostEvent>(this, std::string(name)));
}

absl::StatusOr<HostDevice::HostStream*> HostDevice::Own(Stream& stream,
                                                        const std::string& call) const {
  if (stream.device() != this) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": stream '", stream.name(), "' belongs to another device"));
  }
  return static_cast<HostStream*>(&stream);
}

absl::StatusOr<HostDevice::HostEvent*> HostDevice::Own(Event& event,
                                                       const std::string& call) const {
  if (event.device() != this) {
    return absl::InvalidArgumentError(
        absl::StrCat(call, ": event '", event.name(), "' belongs to another device"));
  }
  return static_cast<HostEvent*>(&event);
}

absl::Status HostDevice::CheckHealthy(const std::string& call) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) return absl::OkStatus();
  return absl::Status(
      failure_.code(),
      absl::StrCat(call, " refused: device host failed earlier: ", failure_.message()));
}

void HostDevice::Fail(const absl::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_.ok()) failure_ = status;
  failed_.store(true, std::memory_order_relaxed);
}

absl::Status HostDevice::Health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

absl::Status HostDevice::CopyAsync(Stream& stream, DeviceBuffer& dst, size_t dst_offset,
                                   const DeviceBuffer& src, size_t src_offset, size_t bytes) {
  const std::string call = absl::StrCat("CopyAsync on stream '", stream.name(), "'");
  ASSIGN_OR_RETURN(HostStream * s, Own(stream, call));
  struct Side {
    const DeviceBuffer& buffer;
    size_t offset;
    const char* role;
  };
  for (const Side& side : {Side{dst, dst_offset, "destination"}, Side{src, src_offset, "source"}}) {
    if (side.buffer.empty() || side.buffer.device() != this) {
      return absl::InvalidArgumentError(
          absl::StrCat(call, ": the ", side.role, " buffer is ",
                       side.buffer.empty() ? "empty" : "another device's"));
    }
    if (side.offset > side.buffer.bytes() || bytes > side.buffer.bytes() - side.offset) {
      return absl::InvalidArgumentError(absl::StrCat(call, ": ", side.role, " bytes [", side.offset,
                                                     ", ", side.offset + bytes, ") outside its ",
                                                     side.buffer.bytes()));
    }
  }
  if (dst.data() == src.data() && dst_offset < src_offset + bytes &&
      src_offset < dst_offset + bytes) {
    return absl::InvalidArgumentError(absl::StrCat(call, ": overlapping ranges of one buffer (",
                                                   bytes, " bytes from ", src_offset, " to ",
                                                   dst_offset, ")"));
  }
  RETURN_IF_ERROR(CheckHealthy(call));
  char* to = dst.as<char>() + dst_offset;
  const char* from = src.as<const char>() + src_offset;
  s->Enqueue([this, to, from, bytes] {
    if (!failed()) std::memcpy(to, from, bytes);
  });
  return absl::OkStatus();
}

absl::Status HostDevice::Launch(Stream& stream, const std::string& op_name,
                                std::function<absl::Status()> op) {
  const std::string call =
      absl::StrCat("Launch of '", op_name, "' on stream '", stream.name(), "'");
  ASSIGN_OR_RETURN(HostStream * s, Own(stream, call));
  if (!op) return absl::InvalidArgumentError(absl::StrCat(call, ": no op"));
  RETURN_IF_ERROR(CheckHealthy(call));
  s->Enqueue([this, op = std::move(op),
              what = absl::StrCat("op '", op_name, "' on stream '", stream.name(), "' failed: ")] {
    if (failed()) return;  // skipped: the device failed before the stream got here
    const absl::Status status = op();
    if (!status.ok()) Fail(absl::Status(status.code(), absl::StrCat(what, status.message())));
  });
  return absl::OkStatus();
}

absl::Status HostDevice::RecordEvent(Event& event, Stream& stream) {
  const std::string call =
      absl::StrCat("RecordEvent of '", event.name(), "' on stream '", stream.name(), "'");
  ASSIGN_OR_RETURN(HostStream * s, Own(stream, call));
  ASSIGN_OR_RETURN(HostEvent * e, Own(event, call));
  RETURN_IF_ERROR(CheckHealthy(call));
  std::shared_ptr<EventState> state = e->state();
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    generation = ++state->latest;
    state->pending.insert(generation);
  }
  // Completes even on a failed device, so that no wait on it hangs.
  s->Enqueue([state, generation] {
    {
      std::lock_guard<std::mutex> lock(state->mu);
      state->pending.erase(generation);
      if (generation == state->latest) state->latest_time = Clock::now();
    }
    state->completed.notify_all();
  });
  return absl::OkStatus();
}

absl::Status HostDevice::WaitEvent(Stream& stream, Event& event) {
  const std::string call =
      absl::StrCat("WaitEvent of stream '", stream.name(), "' on event '", event.name(), "'");
  ASSIGN_OR_RETURN(HostStream * s, Own(stream, call));
  ASSIGN_OR_RETURN(HostEvent * e, Own(event, call));
  RETURN_IF_ERROR(CheckHealthy(call));
  std::shared_ptr<EventState> state = e->state();
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(state->mu);
    generation = state->latest;
  }
  if (generation == 0) {
    return absl::FailedPreconditionError(absl::StrCat(call, ": the event was never recorded"));
  }
  // Cannot wait forever: the record it waits for was enqueued before this wait, and every
  // record completes (device.h).
  s->Enqueue([state, generation] {
    std::unique_lock<std::mutex> lock(state->mu);
    state->completed.wait(lock, [&] { return state->DoneLocked(generation); });
  });
  return absl::OkStatus();
}

absl::Status HostDevice::SynchronizeEvent(Event& event, absl::Duration timeout) {
  const std::string call = absl::StrCat("SynchronizeEvent of '", event.name(), "'");
  ASSIGN_OR_RETURN(HostEvent * e, Own(event, call));
  EventState& state = *e->state();
  {
    std::unique_lock<std::mutex> lock(state.mu);
    const uint64_t generation = state.latest;
    if (generation == 0) {
      return absl::FailedPreconditionError(absl::StrCat(call, ": the event was never recorded"));
    }
    if (!state.completed.wait_until(lock, DeadlineAfter(timeout),
                                    [&] { return state.DoneLocked(generation); })) {
      return absl::DeadlineExceededError(absl::StrCat(call, ": its stream did not reach it within ",
                                                      absl::FormatDuration(timeout)));
    }
  }
  return Health();
}

absl::Status HostDevice::SynchronizeStream(Stream& stream, absl::Duration timeout) {
  const std::string call = absl::StrCat("SynchronizeStream of '", stream.name(), "'");
  ASSIGN_OR_RETURN(HostStream * s, Own(stream, call));
  uint64_t left = 0;
  if (!s->AwaitIdle(DeadlineAfter(timeout), &left)) {
    return absl::DeadlineExceededError(absl::StrCat(call, ": ", left, " op(s) still queued after ",
                                                    absl::FormatDuration(timeout)));
  }
  return Health();
}

absl::StatusOr<bool> HostDevice::EventQuery(Event& event) {
  const std::string call = absl::StrCat("EventQuery of '", event.name(), "'");
  ASSIGN_OR_RETURN(HostEvent * e, Own(event, call));
  RETURN_IF_ERROR(CheckHealthy(call));
  EventState& state = *e->state();
  std::lock_guard<std::mutex> lock(state.mu);
  if (state.latest == 0) {
    return absl::FailedPreconditionError(absl::StrCat(call, ": the event was never recorded"));
  }
  return state.DoneLocked(state.latest);
}

absl::StatusOr<double> HostDevice::ElapsedSeconds(Event& start, Event& end) {
  const std::string call =
      absl::StrCat("ElapsedSeconds from '", start.name(), "' to '", end.name(), "'");
  Clock::time_point times[2];
  Event* events[2] = {&start, &end};
  for (int i = 0; i < 2; ++i) {
    ASSIGN_OR_RETURN(HostEvent * e, Own(*events[i], call));
    EventState& state = *e->state();
    std::lock_guard<std::mutex> lock(state.mu);  // one at a time: start and end may be one event
    if (state.latest == 0 || !state.DoneLocked(state.latest)) {
      return absl::FailedPreconditionError(
          absl::StrCat(call, ": '", events[i]->name(), "' ",
                       state.latest == 0 ? "was never recorded" : "has not completed"));
    }
    times[i] = state.latest_time;
  }
  return std::chrono::duration<double>(times[1] - times[0]).count();
}

}  // namespace xhc::device
