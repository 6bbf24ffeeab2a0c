#ifndef XHC_RUNTIME_CONTROL_LAUNCH_LAUNCH_ENV_H_
#define XHC_RUNTIME_CONTROL_LAUNCH_LAUNCH_ENV_H_

// Where `xhc worker` finds its controller, its rank and the job's size when a launcher
// started it, so a Slurm `srun` or a torchrun / Kubernetes PyTorchJob can start workers
// without per-task flags. A pure function of the flags and an environment map (the caller
// reads the process environment), so every precedence rule is unit-tested.
//
// Precedence, for each value separately: an explicit flag, then torchrun's variables, then
// Slurm's; the first source that is set (non-empty) is the only one read, so a malformed
// variable of a lower source is never consulted and never an error.
//
//   controller  --controller HOST:PORT
//               > XHC_CONTROLLER=HOST:PORT          (what examples/slurm/xhc.sbatch exports)
//               > MASTER_ADDR + MASTER_PORT         (torchrun; both required)
//               > first host of SLURM_JOB_NODELIST (or SLURM_NODELIST), port from
//                 --controller-port > XHC_CONTROLLER_PORT > 7070 (the controller's default)
//   rank hint   --rank-hint > RANK > SLURM_PROCID
//   world size  --world-size > WORLD_SIZE > SLURM_NTASKS > SLURM_NPROCS
//
// A malformed value is kInvalidArgument naming the variable (or flag) and its value.

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace xhc::launch {

using EnvMap = std::map<std::string, std::string>;

// The worker's own flags; empty / negative / zero = not given.
struct LaunchFlags {
  std::string controller;       // --controller
  std::string controller_port;  // --controller-port (only with a Slurm first node)
  int rank_hint = -1;           // --rank-hint
  int world_size = 0;           // --world-size
};

struct WorkerLaunch {
  std::string controller;  // host:port
  int rank_hint = -1;      // -1 = any rank
  int world_size = 0;      // 0 = not known: the controller's count is taken as is
  // Where each value came from ("--controller", "MASTER_ADDR:MASTER_PORT", "SLURM_NTASKS"),
  // for log lines and for errors about a value the controller refuses.
  std::string controller_from, rank_from, world_from;
};

absl::StatusOr<WorkerLaunch> ResolveWorkerLaunch(const LaunchFlags& flags, const EnvMap& env);

// The first host of a Slurm hostlist ("node[07-09,12],gpu3" -> "node07"), as
// `scontrol show hostnames` would print it first; zero padding is kept.
absl::StatusOr<std::string> FirstSlurmHost(const std::string& hostlist);

// The calling process's environment.
EnvMap ProcessEnv();

}  // namespace xhc::launch

#endif  // XHC_RUNTIME_CONTROL_LAUNCH_LAUNCH_ENV_H_
