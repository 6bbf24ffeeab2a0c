#include "runtime/control/launch/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/netns.h"
#include "base/self_exec.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "runtime/common/log.h"
#include "runtime/control/controller/controller.h"
#include "runtime/control/controller/controller_service.h"
#include "runtime/control/dashboard/dashboard_server.h"
#include "runtime/control/launch/shaped_links.h"
#include "runtime/data/corpus.h"
#include "runtime/plan/plan.h"
#include "scheduler/action.h"

namespace xhc::launch {
namespace fs = std::filesystem;
namespace {

struct LastLine {
  std::mutex mu;
  std::string text;
};

struct Child {
  pid_t pid = -1;  // -1 once reaped
  int out_fd = -1;
  std::thread pump;
  std::shared_ptr<LastLine> last = std::make_shared<LastLine>();
};

// Copies a child's output line by line with a "[rank i]" prefix, remembering the last line
// (the likely reason if it dies).
void Pump(int fd, int index, std::shared_ptr<LastLine> last) {
  FILE* in = fdopen(fd, "r");
  if (in == nullptr) return;
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    std::fprintf(stderr, "[rank %d] %s", index, line);
    std::lock_guard<std::mutex> lock(last->mu);
    last->text = line;
    while (!last->text.empty() && last->text.back() == '\n') last->text.pop_back();
  }
  std::free(line);
  std::fclose(in);
}

absl::StatusOr<Child> SpawnWorker(int index, int world_size, const std::string& controller,
                                  const std::string& token_file, int threads,
                                  const std::string& device, const ShapedLinks* links) {
  // Everything the child needs is prepared before fork: after it, only exec-safe calls.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  SpawnSpec spec;
  spec.argv = SelfCommand();
  for (std::string arg :
       {std::string("worker"), std::string("--controller"), controller, std::string("--token-file"),
        token_file, std::string("--rank-hint"), absl::StrCat(index),
        // Explicit, so torchrun or Slurm variables around `xhc launch` (say,
        // inside an salloc) never reach the children's world size.
        std::string("--world-size"), absl::StrCat(world_size), std::string("--device"), device}) {
    spec.argv.push_back(std::move(arg));
  }
  // Workers share the machine's cores: give each its share of OpenMP threads (an explicit
  // OMP_NUM_THREADS from the user wins).
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    spec.env = {{"OMP_NUM_THREADS", absl::StrCat(threads)}};
  }
  if (links != nullptr) {
    // In its own namespace (a restart re-enters the same one), gloo bound to the shaped
    // interface, and no same-host copy: process_vm_readv crosses namespaces, so it would
    // carry the states past the shaping.
    spec.netns_fd = links->netns_fd(index);
    spec.argv.push_back("--advertise-address");
    spec.argv.push_back(links->data_address(index));
    spec.env.push_back({"XHC_SAME_HOST_COPY", "0"});
  }
  spec.output_fd = fds[1];
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(fds[1]);
  if (!pid.ok()) {
    close(fds[0]);
    return pid.status();
  }
  Child c;
  c.pid = *pid;
  c.out_fd = fds[0];
  c.pump = std::thread(Pump, fds[0], index, c.last);
  return c;
}

// Waits for every child; kills the ones still running after `grace_s`.
void Reap(std::vector<Child>& children, double grace_s) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
  for (Child& c : children) {
    if (c.pid > 0) {
      const double left =
          std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      WaitWithTimeout(c.pid, std::max(0.0, left));
      c.pid = -1;
    }
    if (c.pump.joinable()) c.pump.join();
  }
}

// The job's worker processes on this machine, one per world rank: started together,
// replaced one at a time by the controller's recovery, watched for exits of their own, and
// reaped at the end. Every method takes the same lock, which the exit watcher holds while it
// polls.
class WorkerProcesses {
 public:
  WorkerProcesses(int world, std::string controller, std::string token_file, int threads,
                  std::string device, const ShapedLinks* links)
      : world_(world),
        controller_(std::move(controller)),
        token_file_(std::move(token_file)),
        threads_(threads),
        device_(std::move(device)),
        links_(links) {}

  ~WorkerProcesses() { StopWatching(); }

  absl::Status StartAll() {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < world_; ++i) {
      ASSIGN_OR_RETURN(Child c,
                       SpawnWorker(i, world_, controller_, token_file_, threads_, device_, links_));
      children_.push_back(std::move(c));
    }
    return absl::OkStatus();
  }

  // Replacement of a dead or hung worker: make sure the old process is gone (a hung one is
  // still there), then start a new one that asks for the same rank.
  absl::Status Restart(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    if (reaped_) return absl::CancelledError("the job has ended: no worker is restarted");
    Child& old = children_[rank];
    if (old.pid > 0) {
      kill(old.pid, SIGKILL);
      int wstatus = 0;
      waitpid(old.pid, &wstatus, 0);
    }
    if (old.pump.joinable()) old.pump.join();
    ASSIGN_OR_RETURN(Child fresh, SpawnWorker(rank, world_, controller_, token_file_, threads_,
                                              device_, links_));
    children_[rank] = std::move(fresh);
    return absl::OkStatus();
  }

  // Watches for workers that exit on their own (e.g. a bad config or corpus at start-up), so
  // the job fails at once with their last words instead of waiting out a timeout.
  void WatchExits(controller::Controller* ctl) {
    watching_ = true;
    watcher_ = std::thread([this, ctl] {
      while (watching_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::lock_guard<std::mutex> lock(mu_);
        for (size_t r = 0; r < children_.size(); ++r) ReportIfExited(static_cast<int>(r), ctl);
      }
    });
  }

  void StopWatching() {
    watching_ = false;
    if (watcher_.joinable()) watcher_.join();
  }

  // Waits for every worker; kills the ones still running after `grace_s`.
  void ReapAll(double grace_s) {
    StopWatching();
    std::lock_guard<std::mutex> lock(mu_);
    Reap(children_, grace_s);
    reaped_ = true;
  }

 private:
  void ReportIfExited(int rank, controller::Controller* ctl) {
    Child& c = children_[rank];
    int wstatus = 0;
    if (c.pid <= 0 || waitpid(c.pid, &wstatus, WNOHANG) != c.pid) return;
    const pid_t pid = c.pid;
    c.pid = -1;
    std::string last;
    {
      std::lock_guard<std::mutex> l(c.last->mu);
      last = c.last->text;
    }
    ctl->WorkerProcessExited(
        rank, absl::StrFormat("process %d exited (%s %d): %s", pid,
                              WIFEXITED(wstatus) ? "code" : "signal",
                              WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : WTERMSIG(wstatus), last));
  }

  const int world_;
  const std::string controller_, token_file_;
  const int threads_;
  const std::string device_;
  const ShapedLinks* const links_;  // null: unshaped, in the launcher's namespace
  std::mutex mu_;
  std::vector<Child> children_;  // guarded by mu_
  bool reaped_ = false;          // guarded by mu_
  std::atomic<bool> watching_{false};
  std::thread watcher_;
};

// OpenMP threads per worker: the machine's cores shared out, never oversubscribed by default
// (a warning says what it measures when the world has more ranks than cores).
int ThreadsPerWorker(int world) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (world > cores) {
    LogWarning(
        "%d workers on %d cores: the operating system time-slices them, so step times "
        "and exposed communication measure its scheduler, not the pipeline (use "
        "pipeline.workers x pipeline.data_parallel <= %d on this machine)",
        world, cores, cores);
  }
  return std::max(1, cores / world);
}

// The live dashboard and /metrics at `http`, its address printed for the user.
absl::StatusOr<std::unique_ptr<dashboard::DashboardServer>> StartDashboard(
    controller::Controller* ctl, const std::string& http, const std::string& token,
    const std::string& token_file) {
  ASSIGN_OR_RETURN(std::unique_ptr<dashboard::DashboardServer> dash,
                   dashboard::DashboardServer::Start(ctl, http, token));
  std::printf("xhc launch: dashboard %s  (Prometheus: %smetrics)%s\n", dash->url().c_str(),
              dash->url().c_str(),
              dash->requires_token()
                  ? absl::StrCat("; not loopback: send the job token in ", token_file,
                                 " as Authorization: Bearer TOKEN, or open ?token=TOKEN")
                        .c_str()
                  : "");
  std::fflush(stdout);
  return dash;
}

// Bytes of the stage-boundary messages world rank `rank` sends in one step: one state
// ([batch_size x seq_len, n_streams, d_model] floats, the payload stamp left out) per
// SEND_F / SEND_B of its lowered actions. Evaluation passes, replica and mirror gradient
// sums come on top, so this is a lower bound of what its data interface carries.
int64_t BoundaryBytesPerStep(const Config& config, const plan::JobPlan& plan, int rank) {
  const int64_t state_bytes = int64_t{config.train.batch_size} * config.model.seq_len *
                              config.model.residual.n_streams * config.model.d_model *
                              int64_t{sizeof(float)};
  int64_t sends = 0;
  for (const scheduler::Action& a : plan.lowered[plan.PipelineRankOf(rank)]) {
    sends += a.type == scheduler::ActionType::kSendF || a.type == scheduler::ActionType::kSendB;
  }
  return sends * state_bytes;
}

// After a shaped job: what each worker's shaped interface sent against the boundary bytes
// the schedule had it send, in the log and in RUN_DIR/links.json (for tests and studies).
absl::Status ReportLinks(const ShapedLinks& links, const Config& config, const plan::JobPlan& plan,
                         int64_t steps, const std::string& out_dir) {
  ASSIGN_OR_RETURN(std::vector<InterfaceCounters> counters, links.DataCounters());
  std::string json =
      absl::StrCat("{\"bandwidth_bits_per_s\": ", links.bits_per_s(), ", \"steps\": ", steps,
                   ", \"same_host_copy\": false", ", \"namespaces\": [");
  const std::vector<std::string> ids = links.NamespaceIds();
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StrAppend(&json, i ? ", " : "", "\"", ids[i], "\"");
  }
  absl::StrAppend(&json, "], \"host_interface\": \"", links.host_interface(), "\", \"ranks\": [");
  for (int r = 0; r < links.workers(); ++r) {
    const int64_t boundary = BoundaryBytesPerStep(config, plan, r) * steps;
    LogInfo("links: rank %d: %s sent %d bytes, received %d (its schedule's boundary sends: %d)", r,
            ShapedLinks::kDataInterface, counters[r].tx_bytes, counters[r].rx_bytes, boundary);
    absl::StrAppend(
        &json, r ? ", " : "", "{\"rank\": ", r, ", \"tx_bytes\": ", counters[r].tx_bytes,
        ", \"rx_bytes\": ", counters[r].rx_bytes, ", \"boundary_bytes\": ", boundary, "}");
  }
  absl::StrAppend(&json, "]}\n");
  std::ofstream out(fs::path(out_dir) / "links.json");
  out << json;
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", out_dir, "/links.json"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> NewJobToken() {
  // getrandom(2), not /dev/urandom: it needs no device file, so a job starts in a root that
  // holds nothing but the bundle (runtime/control/bundle).
  unsigned char bytes[16];
  if (getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    return absl::InternalError(absl::StrCat("getrandom failed: ", std::strerror(errno)));
  }
  std::string token;
  for (unsigned char b : bytes) absl::StrAppend(&token, absl::Hex(b, absl::kZeroPad2));
  return token;
}

absl::Status WriteTokenFile(const std::string& path, const std::string& token) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot create token file ", path));
  fchmod(fd, 0600);
  const bool ok = write(fd, token.data(), token.size()) == static_cast<ssize_t>(token.size());
  close(fd);
  return ok ? absl::OkStatus() : absl::InternalError(absl::StrCat("cannot write ", path));
}

absl::Status RunLaunch(const Config& config, const LaunchOptions& options) {
  controller::ControllerOptions copts;
  copts.workers = options.workers > 0 ? options.workers : config.pipeline.workers;
  copts.data_parallel = options.data_parallel;
  copts.steps = options.steps;
  copts.run_dir = options.out_dir;
  copts.quiet = options.quiet;
  copts.resume = options.resume;
  // The plan is validated here, before any worker process starts.
  ASSIGN_OR_RETURN(std::unique_ptr<controller::Controller> ctl,
                   controller::Controller::Create(config, copts));
  // Workers run on this machine: check their corpus here too, before any process starts.
  RETURN_IF_ERROR(LoadTrainingCorpus(config).status());
  // Data parallelism multiplies the processes: data_parallel replicas of the pipeline.
  const int world = ctl->plan().world_size();
  const int64_t bandwidth = options.link_bandwidth_bits_per_s >= 0
                                ? options.link_bandwidth_bits_per_s
                                : config.pipeline.link_bandwidth_bits_per_s;
  // Shaped: the links exist before the controller listens on their control address, and
  // outlive every worker (declared before them, destroyed after).
  std::unique_ptr<ShapedLinks> links;
  if (bandwidth > 0) {
    ASSIGN_OR_RETURN(links, ShapedLinks::Create(world, bandwidth));
    LogInfo("links: %s", links->Describe());
  }
  const std::string listen_host = links ? links->controller_address() : "127.0.0.1";
  std::error_code ec;
  fs::create_directories(options.out_dir, ec);
  ASSIGN_OR_RETURN(std::string token, NewJobToken());
  const std::string token_file = (fs::path(options.out_dir) / ".job-token").string();
  RETURN_IF_ERROR(WriteTokenFile(token_file, token));
  ASSIGN_OR_RETURN(std::unique_ptr<controller::ControllerServer> server,
                   controller::ControllerServer::Start(ctl.get(), listen_host + ":0", token, {}));
  LogInfo("controller listening on %s:%d; starting %d workers (%s, %d replica(s))", listen_host,
          server->port(), world, ctl->plan().schedule.type, ctl->plan().data_parallel);
  std::unique_ptr<dashboard::DashboardServer> dash;
  if (!options.http.empty()) {
    ASSIGN_OR_RETURN(dash, StartDashboard(ctl.get(), options.http, token, token_file));
  }
  WorkerProcesses workers(world, absl::StrCat(listen_host, ":", server->port()), token_file,
                          ThreadsPerWorker(world), options.device, links.get());
  if (absl::Status started = workers.StartAll(); !started.ok()) {
    ctl->Stop();
    workers.ReapAll(1);
    return started;
  }
  ctl->SetRestartWorker([&workers](int rank) { return workers.Restart(rank); });
  workers.WatchExits(ctl.get());
  absl::Status status = ctl->Run();
  workers.ReapAll(status.ok() ? 30 : 5);
  ctl->Stop();
  if (links) {
    if (absl::Status reported = ReportLinks(*links, config, ctl->plan(),
                                            ctl->View(-1, -1).num_steps_recorded, options.out_dir);
        !reported.ok()) {
      LogWarning("links: %s", reported.message());
    }
  }
  if (dash) dash->Shutdown();
  server->Shutdown();
  return status;
}

}  // namespace xhc::launch
