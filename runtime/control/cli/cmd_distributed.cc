// xhc launch | controller | worker | status: the distributed job's commands.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/bandwidth.h"
#include "base/status_macros.h"
#include "proto/xhc.grpc.pb.h"
#include "runtime/control/cli/cli_util.h"
#include "runtime/control/cli/commands.h"
#include "runtime/control/controller/controller.h"
#include "runtime/control/controller/controller_service.h"
#include "runtime/control/controller/saved_schedule.h"
#include "runtime/control/dashboard/dashboard_server.h"
#include "runtime/control/launch/launch_env.h"
#include "runtime/control/launch/launcher.h"
#include "runtime/device/device_spec.h"
#include "runtime/worker/rpc_util.h"
#include "runtime/worker/worker.h"

namespace xhc::cli {
namespace {

constexpr char kHttpHelp[] =
    "serve the live dashboard and Prometheus /metrics on HOST:PORT (port 0 = any free port; "
    "a non-loopback address requires the job token)";

constexpr char kScheduleCsvHelp[] =
    "run this PyTorch-format schedule CSV (placement read from it) instead of "
    "pipeline.schedule";

// --schedule-csv FILE takes the place of the config's schedule. Workers get the CSV's text
// from the controller, so the flag need not reach them.
void UseScheduleCsvFlag(const Flags& flags, Config& config) {
  if (!flags.Has("schedule-csv")) return;
  config.pipeline.schedule_csv = flags.Get("schedule-csv");
  config.pipeline.chunks = 1;
}

absl::Status Launch(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(Flags flags,
                   ParseFlagsOrHelp("launch",
                                    "--config FILE [--workers R] [--data-parallel D] [--steps N] "
                                    "[--out DIR] [--resume RUN_DIR] [--schedule-csv FILE] "
                                    "[--http HOST:PORT] [--device DEVICE] [--link-bandwidth RATE]",
                                    args,
                                    {{"config", "job config (YAML)"},
                                     {"workers",
                                      "pipeline ranks per replica (default "
                                      "pipeline.workers)"},
                                     {"data-parallel",
                                      "pipeline replicas (default "
                                      "pipeline.data_parallel); D x R worker "
                                      "processes"},
                                     {"schedule-csv", kScheduleCsvHelp},
                                     {"http", kHttpHelp},
                                     {"device",
                                      "every worker's device: cpu, host, host:SEED "
                                      "or cuda:N (default cpu)"},
                                     {"link-bandwidth",
                                      "run each worker in its own network namespace, its "
                                      "data plane shaped to RATE (1gbit, 200mbit; off = "
                                      "unshaped; default pipeline.link.bandwidth); needs "
                                      "root or CAP_NET_ADMIN and iproute2"},
                                     {"steps", "override train.steps"},
                                     {"out", "run directory (default runs/launch-<time>)"},
                                     {"resume",
                                      "continue the job in RUN_DIR from its last "
                                      "committed checkpoint"}}));
  launch::LaunchOptions o;
  std::string config_path = flags.Get("config");
  if (flags.Has("resume")) {
    o.resume = true;
    o.out_dir = flags.Get("resume");
    if (config_path.empty()) config_path = o.out_dir + "/config.yaml";
  } else {
    o.out_dir = flags.Get("out", DefaultRunDir("launch"));
  }
  if (config_path.empty()) return absl::InvalidArgumentError("missing required flag --config");
  ASSIGN_OR_RETURN(Config config, LoadConfigFile(config_path));
  UseScheduleCsvFlag(flags, config);
  ASSIGN_OR_RETURN(int64_t workers, flags.GetCount("workers", 0));
  o.workers = static_cast<int>(workers);
  ASSIGN_OR_RETURN(int64_t data_parallel, flags.GetCount("data-parallel", 0));
  o.data_parallel = static_cast<int>(data_parallel);
  ASSIGN_OR_RETURN(o.steps, flags.GetCount("steps", -1));
  o.http = flags.Get("http");
  o.device = flags.Get("device", "cpu");
  RETURN_IF_ERROR(device::CheckDeviceSpec(o.device));
  if (flags.Has("link-bandwidth")) {
    ASSIGN_OR_RETURN(o.link_bandwidth_bits_per_s,
                     ParseBandwidth(flags.Get("link-bandwidth"), "--link-bandwidth"));
  }
  std::string schedule = config.pipeline.schedule_csv.empty()
                             ? config.pipeline.schedule
                             : "CSV " + config.pipeline.schedule_csv;
  // A resumed job runs the CSV it started with (controller/saved_schedule.h).
  const std::string saved = controller::SavedSchedulePath(o.out_dir);
  if (o.resume && std::filesystem::exists(saved)) schedule = "CSV " + saved;
  const int replicas = o.data_parallel > 0 ? o.data_parallel : config.pipeline.data_parallel;
  std::printf(
      "xhc launch: %s residual, %d workers x %d replica(s), %s schedule; run directory "
      "%s\n",
      ResidualTypeName(config.model.residual.type).c_str(),
      o.workers > 0 ? o.workers : config.pipeline.workers, replicas, schedule.c_str(),
      o.out_dir.c_str());
  std::fflush(stdout);
  RETURN_IF_ERROR(launch::RunLaunch(config, o));
  std::printf("done: metrics %s/metrics.jsonl, trace %s/trace.json, checkpoints %s/checkpoints\n",
              o.out_dir.c_str(), o.out_dir.c_str(), o.out_dir.c_str());
  return absl::OkStatus();
}

// The controller address, rank hint and world size: flags, else the launcher's
// environment (torchrun, Slurm). Says where they came from when no --controller was given,
// so a Slurm or Kubernetes log shows what the worker understood.
absl::StatusOr<worker::WorkerOptions> LaunchedWorkerOptions(const Flags& flags) {
  launch::LaunchFlags lf;
  lf.controller = flags.Get("controller");
  lf.controller_port = flags.Get("controller-port");
  ASSIGN_OR_RETURN(int64_t hint, flags.GetCount("rank-hint", -1, 0));
  ASSIGN_OR_RETURN(int64_t world, flags.GetCount("world-size", 0));
  lf.rank_hint = static_cast<int>(hint);
  lf.world_size = static_cast<int>(world);
  ASSIGN_OR_RETURN(launch::WorkerLaunch where,
                   launch::ResolveWorkerLaunch(lf, launch::ProcessEnv()));
  worker::WorkerOptions o;
  o.controller = where.controller;
  o.rank_hint = where.rank_hint;
  o.world_size = where.world_size;
  o.world_from = where.world_from;
  if (where.controller_from != "--controller") {
    std::string line = absl::StrCat("xhc worker: controller ", o.controller, " (from ",
                                    where.controller_from, ")");
    if (o.rank_hint >= 0) {
      absl::StrAppend(&line, ", rank hint ", o.rank_hint, " (", where.rank_from, ")");
    }
    if (o.world_size > 0) {
      absl::StrAppend(&line, ", world ", o.world_size, " (", where.world_from, ")");
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  return o;
}

absl::Status Worker(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      Flags flags,
      ParseFlagsOrHelp(
          "worker",
          "[--controller HOST:PORT] (--token-file F | $XHC_JOB_TOKEN) ...\n"
          "Without --controller, the address comes from XHC_CONTROLLER, torchrun's MASTER_ADDR "
          "+ MASTER_PORT, or the first node of a Slurm allocation; rank and world from "
          "RANK / WORLD_SIZE or SLURM_PROCID / SLURM_NTASKS (runtime/control/launch/launch_env.h)",
          args,
          {{"controller", "controller address (default: from the launcher's environment)"},
           {"controller-port",
            "port on the Slurm allocation's first node (default "
            "$XHC_CONTROLLER_PORT, else 7070)"},
           {"token-file", "file holding the job token"},
           {"device",
            "cpu, host, host:SEED (the stream path on CPU threads) or cuda:N "
            "(default cpu)"},
           {"advertise-address", "data-plane address peers connect to"},
           {"config", "refuse a job whose model config differs from this one"},
           {"rank-hint", "preferred rank (default $RANK, else $SLURM_PROCID)"},
           {"world-size",
            "refuse a job of another size (default $WORLD_SIZE, else "
            "$SLURM_NTASKS)"},
           {"tls-ca", "CA certificate (PEM) to verify the controller"},
           {"tls-cert", "client certificate (PEM) for mutual TLS"},
           {"tls-key", "client key (PEM)"},
           {"connect-timeout", "seconds to keep trying to reach the controller (default 60)"}}));
  ASSIGN_OR_RETURN(worker::WorkerOptions o, LaunchedWorkerOptions(flags));
  ASSIGN_OR_RETURN(o.connect_timeout_s, flags.GetDouble("connect-timeout", o.connect_timeout_s));
  if (flags.Has("token-file")) {
    ASSIGN_OR_RETURN(o.token, worker::ReadTokenFile(flags.Get("token-file")));
  } else if (const char* t = std::getenv("XHC_JOB_TOKEN"); t != nullptr) {
    o.token = t;
  }
  o.device = flags.Get("device", "cpu");
  RETURN_IF_ERROR(device::CheckDeviceSpec(o.device));
  o.advertise_address = flags.Get("advertise-address", "127.0.0.1");
  o.config_path = flags.Get("config");
  o.tls = {flags.Get("tls-ca"), flags.Get("tls-cert"), flags.Get("tls-key")};
  if (o.tls.cert.empty() != o.tls.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!o.tls.cert.empty() && o.tls.ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert needs --tls-ca (the CA that signed the controller's certificate)");
  }
  return worker::RunWorker(o);
}

absl::Status Controller(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(
      Flags flags,
      ParseFlagsOrHelp("controller", "--config FILE [--listen HOST:PORT] [--workers R] ...", args,
                       {{"config", "job config (YAML)", false, true},
                        {"listen", "address to serve on (default 127.0.0.1:7070)"},
                        {"workers", "pipeline ranks per replica (default pipeline.workers)"},
                        {"data-parallel",
                         "pipeline replicas (default pipeline.data_parallel); "
                         "the job waits for D x R workers"},
                        {"schedule-csv", kScheduleCsvHelp},
                        {"http", kHttpHelp},
                        {"steps", "override train.steps"},
                        {"out", "run directory (default runs/job)"},
                        {"resume", "continue from OUT's last committed checkpoint", true, false},
                        {"token-file", "job token file (created, mode 0600, if absent)"},
                        {"tls-cert", "server certificate (PEM)"},
                        {"tls-key", "server key (PEM)"},
                        {"tls-client-ca", "require client certificates signed by this CA"}}));
  ASSIGN_OR_RETURN(Config config, LoadConfigFile(flags.Get("config")));
  UseScheduleCsvFlag(flags, config);
  controller::ControllerOptions o;
  ASSIGN_OR_RETURN(int64_t workers, flags.GetCount("workers", config.pipeline.workers));
  o.workers = static_cast<int>(workers);
  ASSIGN_OR_RETURN(int64_t data_parallel, flags.GetCount("data-parallel", 0));
  o.data_parallel = static_cast<int>(data_parallel);
  ASSIGN_OR_RETURN(o.steps, flags.GetCount("steps", -1));
  o.run_dir = flags.Get("out", "runs/job");
  o.resume = flags.GetBool("resume");
  o.register_timeout_s = 3600;
  ASSIGN_OR_RETURN(std::unique_ptr<controller::Controller> ctl,
                   controller::Controller::Create(config, o));
  const std::string token_file = flags.Get("token-file", o.run_dir + "/.job-token");
  std::string token;
  if (absl::StatusOr<std::string> t = worker::ReadTokenFile(token_file); t.ok()) {
    token = *t;
  } else {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(token_file).parent_path(), ec);
    ASSIGN_OR_RETURN(token, launch::NewJobToken());
    RETURN_IF_ERROR(launch::WriteTokenFile(token_file, token));
  }
  controller::TlsFiles tls{flags.Get("tls-cert"), flags.Get("tls-key"), flags.Get("tls-client-ca")};
  ASSIGN_OR_RETURN(auto server, controller::ControllerServer::Start(
                                    ctl.get(), flags.Get("listen", "127.0.0.1:7070"), token, tls));
  std::printf("xhc controller: listening on port %d, waiting for %d workers; token in %s\n",
              server->port(), ctl->plan().world_size(), token_file.c_str());
  std::fflush(stdout);
  std::unique_ptr<dashboard::DashboardServer> dash;
  if (flags.Has("http")) {
    ASSIGN_OR_RETURN(dash, dashboard::DashboardServer::Start(ctl.get(), flags.Get("http"), token));
    std::printf("xhc controller: dashboard %s  (Prometheus: %smetrics)%s\n", dash->url().c_str(),
                dash->url().c_str(), dash->requires_token() ? "; requests need the job token" : "");
    std::fflush(stdout);
  }
  absl::Status s = ctl->Run();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let SHUTDOWN reach workers
  ctl->Stop();
  if (dash) dash->Shutdown();
  server->Shutdown();
  return s;
}

absl::Status Status(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(Flags flags,
                   ParseFlagsOrHelp("status", "--controller HOST:PORT --token-file F", args,
                                    {{"controller", "controller address", false, true},
                                     {"token-file", "job token file", false, true}}));
  ASSIGN_OR_RETURN(std::string token, worker::ReadTokenFile(flags.Get("token-file")));
  ASSIGN_OR_RETURN(auto channel, worker::MakeChannel(flags.Get("controller"), {}));
  auto stub = proto::Controller::NewStub(channel);
  grpc::ClientContext ctx;
  worker::PrepareContext(&ctx, token, 10);
  proto::Empty req;
  proto::StatusResponse resp;
  RETURN_IF_ERROR(worker::FromGrpc(stub->Status(&ctx, req, &resp), "status"));
  std::printf("job: %s, step %lld/%lld, loss %.4f, %.0f tokens/s\n", resp.state().c_str(),
              static_cast<long long>(resp.step()), static_cast<long long>(resp.total_steps()),
              resp.loss(), resp.tokens_per_s());
  for (const std::string& w : resp.workers()) std::printf("  %s\n", w.c_str());
  return absl::OkStatus();
}

}  // namespace

int RunLaunchCommand(const std::vector<std::string>& args) {
  absl::Status s = Launch(args);
  return s.ok() ? 0 : Fail("launch", s);
}
int RunWorkerCommand(const std::vector<std::string>& args) {
  absl::Status s = Worker(args);
  return s.ok() ? 0 : Fail("worker", s);
}
int RunControllerCommand(const std::vector<std::string>& args) {
  absl::Status s = Controller(args);
  return s.ok() ? 0 : Fail("controller", s);
}
int RunStatusCommand(const std::vector<std::string>& args) {
  absl::Status s = Status(args);
  return s.ok() ? 0 : Fail("status", s);
}

}  // namespace xhc::cli
