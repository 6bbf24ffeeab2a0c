#ifndef XHC_TESTS_LAUNCH_SLURM_CLUSTER_H_
#define XHC_TESTS_LAUNCH_SLURM_CLUSTER_H_

// A real one-node Slurm cluster for tests: Debian's slurmctld and slurmd, started as root
// with a slurm.conf, state, spool, logs and pid files all in one temporary folder, on free
// ports, auth/none (no munge daemon, no key to distribute on one host). The node is this
// host (its short hostname, address 127.0.0.1). The destructor cancels every job and stops
// both daemons, so a failing test leaves nothing behind.

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc::testing {

// Why a Slurm cluster cannot start here ("" when it can): slurmctld, slurmd or the client
// commands missing, or not root.
std::string SlurmUnavailableReason();

struct ToolResult {
  int exit_code = -1;  // -1: killed after the timeout
  std::string output;  // stdout and stderr
};

class SlurmCluster {
 public:
  // Writes dir/slurm.conf for `cpus` CPUs, starts both daemons and waits (up to 30 s) for
  // the node to be idle.
  static absl::StatusOr<std::unique_ptr<SlurmCluster>> Start(const std::string& dir, int cpus);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  // Runs a Slurm client command (sbatch, squeue, ...) against this cluster, with `env` added.
  ToolResult Run(std::vector<std::string> argv, double timeout_s,
                 std::vector<std::pair<std::string, std::string>> env = {}) const;

  const std::string& node() const { return node_; }
  // Both daemons' logs, for failure messages.
  std::string Logs() const;

 private:
  SlurmCluster(std::string dir, std::string node) : dir_(std::move(dir)), node_(std::move(node)) {}
  std::string conf() const { return dir_ + "/slurm.conf"; }

  std::string dir_, node_;
  pid_t slurmctld_ = -1, slurmd_ = -1;
};

}  // namespace xhc::testing

#endif  // XHC_TESTS_LAUNCH_SLURM_CLUSTER_H_
