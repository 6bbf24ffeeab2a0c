#include "tests/launch/slurm_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/subprocess.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace fs = std::filesystem;
namespace {

// Debian installs the daemons in /usr/sbin (not on a test's PATH) and the clients in
// /usr/bin.
std::string FindProgram(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"}) {
    const std::string path = absl::StrCat(dir, "/", name);
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string ShortHostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return std::string(buf).substr(0, std::string(buf).find('.'));
}

// Everything in one folder, so two clusters (or another engineer's) never share state; the
// ports were free a moment ago.
std::string SlurmConf(const std::string& dir, const std::string& node, int cpus) {
  return absl::StrCat(
      "ClusterName=xhctest\n"
      "SlurmctldHost=",
      node,
      "(127.0.0.1)\n"
      "SlurmctldPort=",
      FreePort(), "\nSlurmdPort=", FreePort(),
      "\n"
      "SlurmUser=root\nSlurmdUser=root\n"
      "AuthType=auth/none\nCredType=cred/none\n"
      "StateSaveLocation=",
      dir, "/state\nSlurmdSpoolDir=", dir,
      "/spool\n"
      "SlurmctldPidFile=",
      dir, "/slurmctld.pid\nSlurmdPidFile=", dir,
      "/slurmd.pid\n"
      "SlurmctldLogFile=",
      dir, "/slurmctld.log\nSlurmdLogFile=", dir,
      "/slurmd.log\n"
      "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
      "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
      "SchedulerType=sched/builtin\nMpiDefault=none\nReturnToService=2\n"
      "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
      "JobCompType=jobcomp/none\n"
      "NodeName=",
      node, " NodeAddr=127.0.0.1 CPUs=", cpus,
      " State=UNKNOWN\n"
      "PartitionName=test Nodes=",
      node, " Default=YES MaxTime=10 State=UP\n");
}

// A daemon in the foreground (-D), in its own process group, output to dir/<name>.out.
absl::StatusOr<pid_t> StartDaemon(const std::string& dir, const std::string& name,
                                  std::vector<std::string> args) {
  const std::string out = absl::StrCat(dir, "/", name, ".out");
  const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError("cannot create " + out);
  SpawnSpec spec;
  spec.argv = {FindProgram(name), "-D", "-f", dir + "/slurm.conf"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = {{"SLURM_CONF", dir + "/slurm.conf"}};
  spec.output_fd = fd;
  spec.new_process_group = true;
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(fd);
  return pid;
}

// SIGTERM (slurmd and slurmctld shut down cleanly on it), then SIGKILL after 10 s.
void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(-pid, SIGTERM);
  WaitWithTimeout(pid, 10, /*kill_group=*/true);
}

}  // namespace

std::string SlurmUnavailableReason() {
  for (const char* p : {"slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel", "sinfo"}) {
    if (FindProgram(p).empty()) {
      return absl::StrCat(p,
                          " is not installed (Debian: apt-get install slurm-wlm; setup.sh "
                          "installs it)");
    }
  }
  if (geteuid() != 0) return "slurmd must run as root (SlurmUser=root) to start job steps";
  return "";
}

absl::StatusOr<std::unique_ptr<SlurmCluster>> SlurmCluster::Start(const std::string& dir,
                                                                  int cpus) {
  fs::create_directories(dir + "/state");
  fs::create_directories(dir + "/spool");
  std::unique_ptr<SlurmCluster> c(new SlurmCluster(dir, ShortHostname()));
  WriteText(c->conf(), SlurmConf(dir, c->node_, cpus));
  absl::StatusOr<pid_t> ctld = StartDaemon(dir, "slurmctld", {});
  if (!ctld.ok()) return ctld.status();
  c->slurmctld_ = *ctld;
  absl::StatusOr<pid_t> d = StartDaemon(dir, "slurmd", {"-N", c->node_});
  if (!d.ok()) return d.status();  // the destructor stops slurmctld
  c->slurmd_ = *d;
  for (int i = 0; i < 300; ++i) {
    const ToolResult r = c->Run({"sinfo", "-h", "-o", "%T"}, 10);
    if (r.exit_code == 0 && r.output.rfind("idle", 0) == 0) return c;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("Slurm node ", c->node_, " not idle within 30 s:\n", c->Logs()));
}

SlurmCluster::~SlurmCluster() {
  // Jobs first, while slurmd can still kill their processes (proctrack/linuxproc tracks
  // them by parentage), then wait until none is left before the daemons go.
  if (slurmctld_ > 0 && slurmd_ > 0) {
    Run({"scancel", "--quiet", "--full", "--partition=test"}, 10);
    for (int i = 0; i < 150; ++i) {
      const ToolResult r = Run({"squeue", "-h"}, 10);
      if (r.exit_code != 0 || r.output.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  Stop(slurmd_);
  Stop(slurmctld_);
}

ToolResult SlurmCluster::Run(std::vector<std::string> argv, double timeout_s,
                             std::vector<std::pair<std::string, std::string>> env) const {
  ToolResult result;
  static int counter = 0;
  const std::string out = absl::StrCat(dir_, "/tool-", getpid(), "-", counter++, ".out");
  const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return result;
  SpawnSpec spec;
  spec.argv = std::move(argv);
  spec.argv[0] = FindProgram(spec.argv[0]);
  spec.env = std::move(env);
  spec.env.emplace_back("SLURM_CONF", conf());
  spec.output_fd = fd;
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(fd);
  if (pid.ok()) {
    const WaitResult w = WaitWithTimeout(*pid, timeout_s);
    result.exit_code = w.timed_out ? -1 : w.exit_code;
  }
  result.output = ReadText(out);
  fs::remove(out);
  return result;
}

std::string SlurmCluster::Logs() const {
  std::string all;
  for (const char* f : {"slurmctld.out", "slurmctld.log", "slurmd.out", "slurmd.log"}) {
    absl::StrAppend(&all, "--- ", f, "\n", ReadText(absl::StrCat(dir_, "/", f)));
  }
  return all;
}

}  // namespace xhc::testing
