#ifndef XHC_RUNTIME_DEVICE_HOST_DEVICE_H_
#define XHC_RUNTIME_DEVICE_HOST_DEVICE_H_

// The Device interface (device.h) on the CPU with real asynchrony, so the executor's stream
// and event logic is tested without a GPU, also under ThreadSanitizer: each stream is a
// thread running its queue in order, copies are memcpy on that thread, an event completes
// (with a steady-clock timestamp) when its stream reaches it, and a WaitEvent blocks the
// waiting stream's thread, not the host. Both memory kinds are ordinary heap memory;
// kDevice counts against `memory_limit_bytes`.
//
// Seeded delays: with delays on, every stream op (launch, copy, record, wait) first sleeps
// a delay drawn from its stream's own generator, seeded from (seed, the stream's creation
// index), so the delays a stream sees depend on the seed alone, not on thread timing. A
// missing WaitEvent then shows up as a wrong value under the seeds that delay the producer,
// and a test that sets a stream's range far above another's forces their order
// (docs/design/device-streams.md).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/device/device.h"

namespace xhc::device {

// A stream's delay before each op: uniform in [min_us, max_us] microseconds.
struct DelayRange {
  int64_t min_us = 0;
  int64_t max_us = 0;
};

struct HostDeviceOptions {
  uint64_t seed = 0;
  // Every stream's ops wait up to this long (uniform from 0); 0: no delays.
  int64_t max_delay_us = 0;
  // Streams named here (NewStream's name) take this range instead of [0, max_delay_us].
  std::map<std::string, DelayRange, std::less<>> stream_delays;
  // kDevice memory the device may hold at once; 0: no limit.
  size_t memory_limit_bytes = 0;
};

class HostDevice final : public Device {
 public:
  explicit HostDevice(HostDeviceOptions options = {});
  ~HostDevice() override;

  std::string Name() const override { return "host"; }
  absl::StatusOr<DeviceBuffer> Allocate(size_t bytes, MemoryKind kind) override;
  size_t BytesInUse(MemoryKind kind) const override;
  absl::StatusOr<std::unique_ptr<Stream>> NewStream(const std::string& name) override;
  absl::StatusOr<std::unique_ptr<Event>> NewEvent(const std::string& name) override;
  using Device::CopyAsync;
  absl::Status CopyAsync(Stream& stream, DeviceBuffer& dst, size_t dst_offset,
                         const DeviceBuffer& src, size_t src_offset, size_t bytes) override;
  absl::Status Launch(Stream& stream, const std::string& op_name,
                      std::function<absl::Status()> op) override;
  absl::Status RecordEvent(Event& event, Stream& stream) override;
  absl::Status WaitEvent(Stream& stream, Event& event) override;
  absl::Status SynchronizeEvent(Event& event, absl::Duration timeout) override;
  absl::Status SynchronizeStream(Stream& stream, absl::Duration timeout) override;
  absl::StatusOr<bool> EventQuery(Event& event) override;
  absl::StatusOr<double> ElapsedSeconds(Event& start, Event& end) override;
  absl::Status Health() const override;

 private:
  class HostStream;
  class HostEvent;

  void Free(void* data, size_t bytes, MemoryKind kind) override;
  // `stream` / `event` as this device's own, or kInvalidArgument naming `call`.
  absl::StatusOr<HostStream*> Own(Stream& stream, const std::string& call) const;
  absl::StatusOr<HostEvent*> Own(Event& event, const std::string& call) const;
  // OK while healthy; otherwise the failure's code, saying that `call` was refused.
  absl::Status CheckHealthy(const std::string& call) const;
  // Keeps the first failure (sticky).
  void Fail(const absl::Status& status);
  // Read by every op on the streams' threads. Relaxed, not under mu_: a lock taken by every
  // op would order the streams with each other and with the host behind the executor's
  // back, so ThreadSanitizer would no longer see the race a missing WaitEvent leaves.
  bool failed() const { return failed_.load(std::memory_order_relaxed); }

  const HostDeviceOptions options_;
  mutable std::mutex mu_;
  absl::Status failure_;                      // guarded by mu_
  std::atomic<bool> failed_{false};           // !failure_.ok(), for the streams
  size_t host_bytes_ = 0, device_bytes_ = 0;  // in use; guarded by mu_
  int num_streams_ = 0;                       // created so far; guarded by mu_
  int live_streams_ = 0, live_buffers_ = 0;   // guarded by mu_
};

}  // namespace xhc::device

#endif  // XHC_RUNTIME_DEVICE_HOST_DEVICE_H_
