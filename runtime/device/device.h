#ifndef XHC_RUNTIME_DEVICE_DEVICE_H_
#define XHC_RUNTIME_DEVICE_DEVICE_H_

// What the stage executor drives compute and transfers through: memory, streams (ordered
// queues of work), events (points in a stream's work the host or another stream can wait
// for, with timestamps), asynchronous copies and ops launched on a stream. Each call maps
// one-to-one onto CUDA's runtime API, so a CUDA device is a thin wrapper:
//   Allocate          cudaMalloc (kDevice) / cudaMallocHost (kHost: pinned)
//   DeviceBuffer dtor cudaFree / cudaFreeHost
//   NewStream         cudaStreamCreateWithFlags(cudaStreamNonBlocking)
//   NewEvent          cudaEventCreate (timing on)
//   CopyAsync         cudaMemcpyAsync(cudaMemcpyDefault)
//   Launch            the op's kernel launches on the stream (see Launch)
//   RecordEvent       cudaEventRecord
//   WaitEvent         cudaStreamWaitEvent
//   SynchronizeEvent  cudaEventQuery polled up to a deadline
//   SynchronizeStream cudaStreamQuery polled up to a deadline
//   EventQuery        cudaEventQuery
//   ElapsedSeconds    cudaEventElapsedTime
// HostDevice (host_device.h) implements it on the CPU with a thread per stream, for tests of
// the executor's stream and event logic (docs/design/device-streams.md).
//
// Contract, the same for every implementation:
//  * Ordering. Work on one stream runs in the order it was enqueued. Work on different
//    streams is unordered unless a WaitEvent orders it. The host is ordered with a stream
//    only by SynchronizeEvent / SynchronizeStream (or an EventQuery that returned true).
//  * Buffers. Whatever a copy or an op reads or writes stays in use until an event recorded
//    after it on the same stream has completed: the caller must not touch it, free it or
//    reuse it before then (a DeviceBuffer's destructor does not wait, which is stricter than
//    cudaFree's implicit device synchronization: code correct here is correct on CUDA).
//  * Events. RecordEvent captures the work enqueued on the stream so far; recording again
//    replaces that capture for later waits (CUDA's semantics). Waiting on, querying or
//    timing an event that was never recorded is kFailedPrecondition. CUDA treats a wait on a
//    never-recorded event as already complete, which turns a wait placed before its record
//    into a silent race; refusing it makes that bug loud on every device.
//  * Sticky failure. The first op that fails (Launch's op returning an error) fails the
//    device, as a CUDA kernel fault fails the context: ops already queued on any stream are
//    skipped (events still complete, so no wait hangs), Synchronize* return the failure, and
//    every later enqueue or allocation is refused with its code. Recovery is a new device.
//  * Argument errors (a null op, a buffer or stream of another device, a copy out of
//    bounds) are kInvalidArgument at the call and fail nothing.
//  * Blocking. Only SynchronizeEvent and SynchronizeStream block the host, each within a
//    deadline (kDeadlineExceeded names the event or stream). An op must not call them.
//  * Threads. Device methods may be called from any thread. Streams, events and buffers must
//    be destroyed before their device; destroying a stream first lets its queued work finish.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace xhc::device {

class Device;

// kDevice: the accelerator's memory (not host-addressable on CUDA). kHost: page-locked host
// memory the device copies to and from asynchronously (the transport's staging buffers).
enum class MemoryKind { kHost, kDevice };

const char* MemoryKindName(MemoryKind kind);

// A device's refusal of anything larger: far beyond any accelerator's memory, so a size this
// large is a bug (an overflowed or negative count), not a request.
inline constexpr size_t kMaxAllocationBytes = size_t{1} << 40;

// Memory from Device::Allocate, returned to its device when destroyed or Reset (move-only).
// The 256-byte alignment of cudaMalloc.
class DeviceBuffer {
 public:
  static constexpr size_t kAlignment = 256;

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Reset(); }

  // Frees the memory now (see the contract on buffers still in use); empty afterwards.
  void Reset();

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  const Device* device() const { return device_; }
  bool empty() const { return data_ == nullptr; }

 private:
  friend class Device;
  DeviceBuffer(Device* device, void* data, size_t bytes, MemoryKind kind)
      : device_(device), data_(data), bytes_(bytes), kind_(kind) {}

  Device* device_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::kDevice;
};

// An ordered queue of work on one device. Made by Device::NewStream; destroying it lets the
// work already queued finish first.
class Stream {
 public:
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  const std::string& name() const { return name_; }
  const Device* device() const { return device_; }
  // The implementation's stream (a cudaStream_t on CUDA) for an op's kernel launches; null on
  // the host device.
  virtual void* native_handle() const { return nullptr; }

 protected:
  Stream(const Device* device, std::string name) : device_(device), name_(std::move(name)) {}

 private:
  const Device* device_;
  std::string name_;
};

// A point in a stream's work (see the contract on events). Made by Device::NewEvent; may be
// destroyed while a record or wait of it is still queued.
class Event {
 public:
  virtual ~Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  const std::string& name() const { return name_; }
  const Device* device() const { return device_; }

 protected:
  Event(const Device* device, std::string name) : device_(device), name_(std::move(name)) {}

 private:
  const Device* device_;
  std::string name_;
};

class Device {
 public:
  virtual ~Device() = default;

  // "host", "cuda:0".
  virtual std::string Name() const = 0;

  // `bytes` of `kind` memory, uninitialized. kInvalidArgument for 0 or more than
  // kMaxAllocationBytes; kResourceExhausted, naming the requested and the available bytes,
  // beyond the device's memory limit, decided before anything is allocated.
  virtual absl::StatusOr<DeviceBuffer> Allocate(size_t bytes, MemoryKind kind) = 0;
  // Bytes of `kind` memory held by live DeviceBuffers.
  virtual size_t BytesInUse(MemoryKind kind) const = 0;

  // `name` appears in errors and traces ("compute", "copy", "fb-backward").
  virtual absl::StatusOr<std::unique_ptr<Stream>> NewStream(const std::string& name) = 0;
  virtual absl::StatusOr<std::unique_ptr<Event>> NewEvent(const std::string& name) = 0;

  // Enqueues a copy of `bytes` from src[src_offset..] to dst[dst_offset..] on `stream`, in
  // any direction between kHost and kDevice memory. kInvalidArgument for a range outside a
  // buffer or overlapping ranges of one buffer.
  virtual absl::Status CopyAsync(Stream& stream, DeviceBuffer& dst, size_t dst_offset,
                                 const DeviceBuffer& src, size_t src_offset, size_t bytes) = 0;
  absl::Status CopyAsync(Stream& stream, DeviceBuffer& dst, const DeviceBuffer& src, size_t bytes) {
    return CopyAsync(stream, dst, 0, src, 0, bytes);
  }

  // Enqueues an op on `stream`. `op` is the op's work in stream order: on the host device
  // it runs on the stream's thread when the stream reaches it; on a CUDA device it runs at
  // once on the calling thread and launches its kernels on stream.native_handle(). Either
  // way its buffers are in use until an event recorded after it completes, and what it
  // captures must stay valid until then. An error it returns fails the device (sticky,
  // named by `op_name`).
  virtual absl::Status Launch(Stream& stream, const std::string& op_name,
                              std::function<absl::Status()> op) = 0;

  // Captures the work enqueued on `stream` so far in `event`; the event completes, with a
  // timestamp, when the stream reaches this point.
  virtual absl::Status RecordEvent(Event& event, Stream& stream) = 0;
  // Work enqueued on `stream` after this call waits for `event`'s latest record to complete.
  // The host does not wait.
  virtual absl::Status WaitEvent(Stream& stream, Event& event) = 0;

  // Blocks the host until `event`'s latest record completed, then returns the device's
  // health; kDeadlineExceeded after `timeout`.
  virtual absl::Status SynchronizeEvent(Event& event, absl::Duration timeout) = 0;
  // Blocks the host until the work enqueued on `stream` so far is done, then returns the
  // device's health; kDeadlineExceeded after `timeout`.
  virtual absl::Status SynchronizeStream(Stream& stream, absl::Duration timeout) = 0;
  // Whether `event`'s latest record completed, without blocking.
  virtual absl::StatusOr<bool> EventQuery(Event& event) = 0;
  // Seconds from `start`'s timestamp to `end`'s (negative when `end` came first), both of
  // their latest records; kFailedPrecondition unless both have completed. How the executor
  // measures compute and exposed communication without blocking the stream.
  virtual absl::StatusOr<double> ElapsedSeconds(Event& start, Event& end) = 0;

  // OK, or the first failure (see the contract on sticky failure).
  virtual absl::Status Health() const = 0;

 protected:
  // Wraps memory this device allocated; the buffer hands it back through Free.
  DeviceBuffer WrapBuffer(void* data, size_t bytes, MemoryKind kind) {
    return DeviceBuffer(this, data, bytes, kind);
  }
  // Returns a buffer's memory (DeviceBuffer::Reset); never fails.
  virtual void Free(void* data, size_t bytes, MemoryKind kind) = 0;

 private:
  friend class DeviceBuffer;
};

}  // namespace xhc::device

#endif  // XHC_RUNTIME_DEVICE_DEVICE_H_
