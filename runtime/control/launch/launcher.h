#ifndef XHC_RUNTIME_CONTROL_LAUNCH_LAUNCHER_H_
#define XHC_RUNTIME_CONTROL_LAUNCH_LAUNCHER_H_

// `xhc launch`: a whole job on this machine. The controller runs in-process on 127.0.0.1,
// R workers run as child processes of this binary (`xhc worker`), their output prefixed by
// rank; the job token is written with mode 0600 and handed to the children as a file. With a
// link bandwidth, each worker runs in its own network namespace behind a shaped link and the
// controller listens on the unshaped control segment instead (shaped_links.h).

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/common/config.h"

namespace xhc::launch {

struct LaunchOptions {
  int workers = 0;        // pipeline ranks per replica; 0 = pipeline.workers
  int data_parallel = 0;  // pipeline replicas; 0 = pipeline.data_parallel (processes: the
                          // product)
  int64_t steps = -1;     // -1 = train.steps
  std::string out_dir;    // run directory
  bool resume = false;    // continue from out_dir/checkpoints
  bool quiet = false;
  std::string http;            // "HOST:PORT": serve the dashboard and /metrics there ("" = not)
  std::string device = "cpu";  // every worker's --device (runtime/device/device_spec.h)
  // --link-bandwidth: -1 = pipeline.link.bandwidth; 0 = unshaped; > 0 = each worker in its
  // own network namespace, its data egress shaped to this many bits/s (shaped_links.h).
  int64_t link_bandwidth_bits_per_s = -1;
};

absl::Status RunLaunch(const Config& config, const LaunchOptions& options);

// 32 random hex characters from getrandom(2).
absl::StatusOr<std::string> NewJobToken();

// Writes `token` to `path` with mode 0600.
absl::Status WriteTokenFile(const std::string& path, const std::string& token);

}  // namespace xhc::launch

#endif  // XHC_RUNTIME_CONTROL_LAUNCH_LAUNCHER_H_
