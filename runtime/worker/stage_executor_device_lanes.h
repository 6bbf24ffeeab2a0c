#ifndef XHC_RUNTIME_WORKER_STAGE_EXECUTOR_DEVICE_LANES_H_
#define XHC_RUNTIME_WORKER_STAGE_EXECUTOR_DEVICE_LANES_H_

// The device path's step state (stage_executor_device.cc), private to StageExecutor's sources:
// complete wherever the executor is built or destroyed.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "runtime/device/device.h"
#include "runtime/transport/transport.h"
#include "runtime/worker/payload_stamp.h"
#include "runtime/worker/stage_executor.h"

namespace xhc::worker {

// A state on the device and the event after which it holds its data.
struct StageExecutor::DeviceState {
  std::shared_ptr<device::DeviceBuffer> buffer;
  std::shared_ptr<device::Event> ready;
};

// A receive: the transport's host buffer (payload and stamp), its request once the copy stream
// has posted it, and the sender's stamp time once the copy stream has waited for it.
struct StageExecutor::DeviceRecv {
  device::DeviceBuffer staging;
  size_t elements = 0;
  std::unique_ptr<Request> request;
  PayloadStamp expected;
  int64_t send_unix_us = 0;
};

struct StageExecutor::DeviceLanes {
  std::unique_ptr<device::Stream> compute, compute_b, copy;
  // The step's origin: an event the host waited for on the compute stream, and the host's
  // clock just after; every event's time is the origin's plus the device's elapsed time.
  std::unique_ptr<device::Event> origin;
  absl::Time origin_time;
  std::map<Key, DeviceState> local_fwd, local_bwd;  // handed over on this rank
  std::map<Key, std::shared_ptr<DeviceRecv>> recv_fwd, recv_bwd;
  std::map<int, std::shared_ptr<device::Event>> stage_last;  // after each stage's latest op
  struct Record {
    std::string name;
    int track;
    const device::Stream* stream;
    std::shared_ptr<device::Event> start, end;
    std::shared_ptr<DeviceRecv> waited;  // the received input a compute op waited for
    int mb = -1;                         // a compute op's micro-batch
  };
  std::vector<Record> records;  // in enqueue order
  struct Send {
    device::DeviceBuffer staging;
    std::unique_ptr<Request> request;  // set by the copy stream
  };
  std::vector<std::shared_ptr<Send>> sends;
  std::vector<double> losses;  // by micro-batch of this replica, set by the loss stage's F
  std::vector<char> has_loss;
  std::vector<DeviceState> retired;                   // in use by enqueued work until the end
  std::vector<std::shared_ptr<DeviceRecv>> consumed;  // the same, for receives
};

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_STAGE_EXECUTOR_DEVICE_LANES_H_
