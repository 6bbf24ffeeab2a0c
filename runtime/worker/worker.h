#ifndef XHC_RUNTIME_WORKER_WORKER_H_
#define XHC_RUNTIME_WORKER_WORKER_H_

// A worker process (`xhc worker`): registers with the controller, checks its assignment
// against the plan it computes from the job config, rendezvouses with its peers through
// the controller's key-value store, streams heartbeats and executes the controller's
// commands (steps, checkpoints, shutdown) with a StageExecutor.

#include <string>

#include "absl/status/status.h"
#include "runtime/worker/rpc_util.h"

namespace xhc::worker {

struct WorkerOptions {
  std::string controller;                       // host:port
  std::string token;                            // the job token
  std::string device = "cpu";                   // runtime/device/device_spec.h
  std::string advertise_address = "127.0.0.1";  // data-plane address peers connect to
  std::string config_path;                      // optional: refuse a job whose model config differs
  int rank_hint = -1;
  int world_size = 0;             // the launcher's worker count; 0 = not known
  std::string world_from;         // where world_size came from, for the refusal message
  double connect_timeout_s = 60;  // how long to keep trying to reach the controller
  ClientTls tls;
};

// Returns OK after a SHUTDOWN command; an error (naming the cause) otherwise.
absl::Status RunWorker(const WorkerOptions& options);

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_WORKER_H_
