#ifndef XHC_RUNTIME_DEVICE_DEVICE_SPEC_H_
#define XHC_RUNTIME_DEVICE_DEVICE_SPEC_H_

// What a worker's `--device` names, and the device it makes:
//   cpu         no device: the stage executor runs each action on its own thread (the default
//               and the fastest on CPUs)
//   host        the host device (host_device.h): the executor's stream path on CPU threads,
//   host:SEED   with every stream operation delayed by a seeded 0-200 us when SEED is given
//               (a job that must give the same bits however its streams interleave)
//   cuda:N      the N-th GPU: refused, saying why, until the CUDA device and model exist
// Anything else is kInvalidArgument naming the accepted forms.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/device/device.h"

namespace xhc::device {

// Null for "cpu".
absl::StatusOr<std::unique_ptr<Device>> MakeDevice(const std::string& spec);

// The same checks without making anything (flag validation before a job starts).
absl::Status CheckDeviceSpec(const std::string& spec);

}  // namespace xhc::device

#endif  // XHC_RUNTIME_DEVICE_DEVICE_SPEC_H_
