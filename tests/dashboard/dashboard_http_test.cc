// /metrics and the token rule with real processes. A real Prometheus server (Debian's
// `prometheus`, config and storage in a temp folder, 1 s scrapes) scrapes a running
// `xhc launch --http 127.0.0.1:0` job; the values its query API returns for one scrape must
// equal that step's and that checkpoint's line of the job's metrics.jsonl; `promtool check
// metrics` accepts the job's /metrics. A job on 0.0.0.0 answers 401 without the job token;
// `xhc controller --http` serves too.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/strict_skip.h"
#include "base/subprocess.h"
#include "gtest/gtest.h"
#include "tests/dashboard/dashboard_job.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

constexpr char kPrometheus[] = "/usr/bin/prometheus";
constexpr char kPromtool[] = "/usr/bin/promtool";

// A Prometheus server in its own process group, stopped (SIGKILL) when this goes.
class PrometheusServer {
 public:
  PrometheusServer(const std::string& dir, int target_port) : port_(FreePort()) {
    WriteText(dir + "/prometheus.yml",
              absl::StrCat("global: {scrape_interval: 1s, scrape_timeout: 1s}\n"
                           "scrape_configs:\n"
                           "  - job_name: xhc\n"
                           "    static_configs: [{targets: ['127.0.0.1:",
                           target_port, "']}]\n"));
    SpawnSpec spec;
    spec.argv = {"/bin/sh", "-c",
                 absl::StrCat("exec ", kPrometheus, " --config.file=", dir, "/prometheus.yml",
                              " --storage.tsdb.path=", dir, "/tsdb --web.listen-address=127.0.0.1:",
                              port_, " >>", dir, "/prometheus.log 2>&1")};
    spec.new_process_group = true;
    absl::StatusOr<pid_t> pid = Spawn(spec);
    pid_ = pid.ok() ? *pid : -1;
  }
  ~PrometheusServer() {
    if (pid_ <= 0) return;
    kill(-pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  // The query API's result vector for `query` (empty while not ready).
  nlohmann::json Query(const std::string& query) {
    std::string encoded;
    for (unsigned char c : query) {
      if (std::isalnum(c) || c == '_') {
        encoded += static_cast<char>(c);
      } else {
        encoded += absl::StrFormat("%%%02X", c);
      }
    }
    const HttpReply r = HttpGet(port_, "/api/v1/query?query=" + encoded);
    if (r.status != 200) return nlohmann::json::array();
    const nlohmann::json doc = nlohmann::json::parse(r.body, nullptr, false);
    if (doc.is_discarded() || doc["status"] != "success") return nlohmann::json::array();
    return doc["data"]["result"];
  }

 private:
  int port_ = 0, pid_ = -1;
};

// The metrics.jsonl line (parsed) whose `key` equals `value`; null if none.
nlohmann::json MetricsLine(const std::string& run_dir, const std::string& key, int64_t value) {
  std::istringstream in(ReadText(run_dir + "/metrics.jsonl"));
  nlohmann::json found;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains(key) && j[key] == value) found = j;
  }
  return found;
}

TEST(DashboardHttp, PrometheusScrapesTheValuesOfMetricsJsonl) {
  if (access(kPrometheus, X_OK) != 0 || access(kPromtool, X_OK) != 0) {
    XHC_SKIP_OR_FAIL(kPrometheus << " or " << kPromtool
                                 << " not installed (Debian package prometheus; setup.sh)");
  }
  const std::string dir = FreshDir("dashboard_prometheus");
  DashboardJob job(dir, "127.0.0.1:0");
  absl::StatusOr<int> port = job.Port();
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_TRUE(job.WaitForStepAndCheckpoint(5, 30)) << job.log();
  // promtool lints one /metrics body.
  const HttpReply body = HttpGet(*port, "/metrics");
  ASSERT_EQ(body.status, 200);
  WriteText(dir + "/metrics.txt", body.body);
  EXPECT_EQ(RunCommand(absl::StrCat(kPromtool, " check metrics < ", dir, "/metrics.txt"),
                       dir + "/promtool.log"),
            0)
      << ReadText(dir + "/promtool.log") << body.body;

  PrometheusServer prom(dir, *port);
  // One scrape's samples: every series of the query carries the same timestamp.
  const std::string query =
      "{__name__=~\"xhc_step|xhc_loss|xhc_tokens_per_second|xhc_exposed_comm_ratio|"
      "xhc_peer_wait_ratio|xhc_bubble_ratio|xhc_other_cpu_ratio|xhc_checkpoint_step|"
      "xhc_checkpoint_write_seconds|"
      "xhc_checkpoint_snapshot_stall_seconds|xhc_worker_up|xhc_val_loss\"}";
  std::map<std::string, double> v;
  bool one_scrape = false;
  for (int i = 0; i < 300 && !one_scrape; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const nlohmann::json result = prom.Query(query);
    if (result.size() < 14) continue;  // not scraped yet
    v.clear();
    std::set<double> stamps;
    for (const nlohmann::json& s : result) {
      std::string name = s["metric"]["__name__"];
      if (s["metric"].contains("rank")) name += "/" + s["metric"]["rank"].get<std::string>();
      v[name] = std::stod(s["value"][1].get<std::string>());
      stamps.insert(s["value"][0].get<double>());
    }
    one_scrape = stamps.size() == 1;
  }
  ASSERT_TRUE(one_scrape) << "Prometheus never returned one whole scrape\n"
                          << ReadText(dir + "/prometheus.log");
  const nlohmann::json step = MetricsLine(job.run_dir(), "step", std::lround(v["xhc_step"]));
  job.Stop();
  ASSERT_FALSE(step.is_null()) << "no metrics.jsonl line for step " << v["xhc_step"];
  std::printf("scraped step %.0f: loss %.9g, %.1f tokens/s\n", v["xhc_step"], v["xhc_loss"],
              v["xhc_tokens_per_second"]);
  // metrics.jsonl rounds: loss to 6 decimals, tokens/s to 1, ratios to 4.
  EXPECT_NEAR(v["xhc_loss"], step["loss"].get<double>(), 5.1e-7);
  EXPECT_NEAR(v["xhc_tokens_per_second"], step["tokens_per_s"].get<double>(), 0.051);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NEAR(v[absl::StrCat("xhc_exposed_comm_ratio/", r)], step["exposed_comm"][r], 5.1e-5);
    EXPECT_NEAR(v[absl::StrCat("xhc_peer_wait_ratio/", r)], step["peer_wait"][r], 5.1e-5);
    EXPECT_NEAR(v[absl::StrCat("xhc_bubble_ratio/", r)], step["bubble"][r], 5.1e-5);
    EXPECT_NEAR(v[absl::StrCat("xhc_other_cpu_ratio/", r)], step["other_cpu"][r], 5.1e-5);
    EXPECT_EQ(v[absl::StrCat("xhc_worker_up/", r)], 1);
  }
  const nlohmann::json ckpt =
      MetricsLine(job.run_dir(), "checkpoint_step", std::lround(v["xhc_checkpoint_step"]));
  ASSERT_FALSE(ckpt.is_null()) << "no checkpoint line for step " << v["xhc_checkpoint_step"];
  EXPECT_NEAR(v["xhc_checkpoint_write_seconds"], ckpt["write_s"].get<double>(), 5.1e-7);
  EXPECT_NEAR(v["xhc_checkpoint_snapshot_stall_seconds"], ckpt["snapshot_stall_s"].get<double>(),
              5.1e-7);
}

TEST(DashboardHttp, ANonLoopbackDashboardRefusesRequestsWithoutTheJobToken) {
  const std::string dir = FreshDir("dashboard_token");
  DashboardJob job(dir, "0.0.0.0:0");
  absl::StatusOr<int> port = job.Port();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_NE(job.log().find("send the job token"), std::string::npos) << job.log();
  const std::string token = job.token();
  ASSERT_EQ(token.size(), 32u);
  for (const char* path : {"/", "/api/state", "/metrics"}) {
    SCOPED_TRACE(path);
    const HttpReply none = HttpGet(*port, path);
    EXPECT_EQ(none.status, 401);
    EXPECT_EQ(none.body.find("xhc_step"), std::string::npos);
    EXPECT_EQ(HttpGet(*port, path, std::string(32, '0')).status, 401);
    EXPECT_EQ(HttpGet(*port, path, token).status, 200);
    EXPECT_EQ(HttpGet(*port, absl::StrCat(path, "?token=", token)).status, 200);
  }
  EXPECT_NE(HttpGet(*port, "/metrics", token).body.find("# TYPE xhc_step gauge"),
            std::string::npos);
}

// `xhc controller --http` serves the same routes before any worker has joined.
TEST(DashboardHttp, ControllerCommandServesTheDashboardWhileWaitingForWorkers) {
  const std::string dir = FreshDir("dashboard_controller");
  DashboardJob job(dir, "127.0.0.1:0", /*controller_only=*/true);
  absl::StatusOr<int> port = job.Port();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_NE(job.log().find("xhc controller: dashboard http://127.0.0.1:"), std::string::npos);
  const HttpReply state = HttpGet(*port, "/api/state");
  ASSERT_EQ(state.status, 200) << job.log();
  const nlohmann::json doc = nlohmann::json::parse(state.body);
  EXPECT_EQ(doc["job"]["state"], "waiting for workers");
  ASSERT_EQ(doc["workers"].size(), 2u);
  EXPECT_EQ(doc["workers"][1]["health"], "not registered");
  EXPECT_NE(HttpGet(*port, "/metrics").body.find("\nxhc_worker_up{rank=\"1\"} 0\n"),
            std::string::npos);
  EXPECT_NE(HttpGet(*port, "/").body.find("api/state"), std::string::npos);
}

}  // namespace
}  // namespace xhc::testing
