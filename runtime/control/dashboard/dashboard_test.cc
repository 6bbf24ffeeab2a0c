// The dashboard's pieces in process: the Prometheus text and /api/state JSON of a known
// JobView, address parsing, and the real HTTP server over a real Controller (no workers):
// every route answers, and a non-loopback address refuses requests without the job token.
#include <httplib.h>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/common/config.h"
#include "runtime/control/controller/controller.h"
#include "runtime/control/dashboard/dashboard_server.h"
#include "runtime/control/dashboard/prometheus_text.h"
#include "runtime/control/dashboard/state_json.h"

namespace xhc::dashboard {
namespace {

controller::JobView TwoRankView() {
  controller::JobView v;
  v.job_id = "job-1";
  v.state = "running";
  v.schedule = "1f1b";
  v.residual = "xhc";
  v.num_workers = 2;
  v.step = 7;
  v.total_steps = 10;
  v.num_steps_recorded = 7;
  v.num_checkpoints_recorded = 1;
  controller::StepRecord s;
  s.step = 7;
  s.loss = 3.25;
  s.val_loss = 3.5;
  s.tokens_per_s = 1234.5;
  s.exposed_comm = {0.125, 0.25};
  s.peer_wait = {0.375, 0.5};
  s.bubble = {0.5, 0.0625};
  s.other_cpu = {0.03125, 0.046875};
  s.peak_rss_mb = {1.0, 2.0};
  v.steps = {s};
  controller::CheckpointRecord c;
  c.step = 5;
  c.snapshot_stall_s = 0.001;
  c.write_s = 0.02;
  v.checkpoints = {c};
  for (int r = 0; r < 2; ++r) {
    controller::WorkerView w;
    w.rank = r;
    w.host = r == 0 ? "10.0.0.1" : "host \"b\"\\x";
    w.health = r == 0 ? "alive" : "dead";
    v.workers.push_back(w);
  }
  proto::Span a, b;
  a.set_name("F0.0");
  a.set_start_us(1000);
  a.set_dur_us(10);
  b.set_name("wait RECV_F0.0");
  b.set_track(1);
  b.set_start_us(1004);
  b.set_dur_us(3);
  v.last_step_spans = {a, b};
  v.last_step_span_ranks = {0, 1};
  v.spans_step = 7;
  return v;
}

TEST(PrometheusTextTest, EverySampleHasItsFamilysHelpAndType) {
  const std::string text = PrometheusText(TwoRankView());
  std::string family;
  bool help = false;
  int samples = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "# HELP ")) {
      const std::string rest(line.substr(7));
      family = rest.substr(0, rest.find(' '));
      help = true;
    } else if (absl::StartsWith(line, "# TYPE ")) {
      EXPECT_TRUE(help) << line;
      EXPECT_TRUE(absl::StartsWith(line.substr(7), family + " ")) << line;
    } else {
      ++samples;
      EXPECT_TRUE(absl::StartsWith(line, family)) << line << " outside family " << family;
    }
  }
  EXPECT_GT(samples, 20);
  EXPECT_NE(text.find("\nxhc_step 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nxhc_loss 3.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nxhc_val_loss 3.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nxhc_exposed_comm_ratio{rank=\"1\"} 0.25\n"), std::string::npos);
  EXPECT_NE(text.find("\nxhc_bubble_ratio{rank=\"1\"} 0.0625\n"), std::string::npos);
  EXPECT_NE(text.find("\nxhc_peer_wait_ratio{rank=\"0\"} 0.375\n"), std::string::npos);
  EXPECT_NE(text.find("\nxhc_other_cpu_ratio{rank=\"1\"} 0.046875\n"), std::string::npos);
  EXPECT_NE(text.find("\nxhc_worker_up{rank=\"1\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("\nxhc_worker_peak_rss_bytes{rank=\"1\"} 2097152\n"), std::string::npos);
  EXPECT_NE(text.find("\nxhc_checkpoint_write_seconds 0.02\n"), std::string::npos);
  EXPECT_NE(text.find("xhc_job_state{state=\"running\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("xhc_job_state{state=\"recovering\"} 0\n"), std::string::npos);
  // Label values escape quotes and backslashes.
  EXPECT_NE(text.find("host=\"host \\\"b\\\"\\\\x\""), std::string::npos) << text;
}

TEST(StateJsonTest, CarriesRecordsWorkersAndTheTimelineFromZero) {
  const nlohmann::json doc = nlohmann::json::parse(StateJson(TwoRankView()));
  EXPECT_EQ(doc["job"]["state"], "running");
  EXPECT_EQ(doc["job"]["step"], 7);
  ASSERT_EQ(doc["workers"].size(), 2u);
  EXPECT_EQ(doc["workers"][1]["health"], "dead");
  ASSERT_EQ(doc["steps"].size(), 1u);
  EXPECT_EQ(doc["steps"][0]["loss"], 3.25);
  EXPECT_EQ(doc["steps"][0]["val_loss"], 3.5);
  EXPECT_EQ(doc["steps"][0]["exposed_comm"][1], 0.25);
  EXPECT_EQ(doc["steps"][0]["peer_wait"][1], 0.5);
  EXPECT_EQ(doc["steps"][0]["other_cpu"][1], 0.046875);
  EXPECT_EQ(doc["checkpoints"][0]["write_s"], 0.02);
  ASSERT_EQ(doc["timeline"]["spans"].size(), 2u);
  EXPECT_EQ(doc["timeline"]["spans"][0]["start_us"], 0);
  EXPECT_EQ(doc["timeline"]["spans"][1]["start_us"], 4);
  EXPECT_EQ(doc["timeline"]["spans"][1]["rank"], 1);
  EXPECT_EQ(doc["timeline"]["step"], 7);
}

TEST(HostPortTest, ParsesAndNamesTheFlagOnBadInput) {
  absl::StatusOr<HostPort> hp = ParseHostPort("127.0.0.1:0");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_EQ(hp->port, 0);
  hp = ParseHostPort("[::1]:8080");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->port, 8080);
  for (const char* bad : {"8080", "host:", "host:99999", "host:x1", "[::1]8080"}) {
    hp = ParseHostPort(bad);
    ASSERT_FALSE(hp.ok()) << bad;
    EXPECT_NE(hp.status().message().find(absl::StrCat("--http ", bad)), std::string::npos)
        << hp.status();
  }
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("127.3.2.1"));
  EXPECT_TRUE(IsLoopback("localhost"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
  EXPECT_FALSE(IsLoopback("10.1.2.3"));
  EXPECT_FALSE(IsLoopback("::"));
}

std::unique_ptr<controller::Controller> IdleController() {
  absl::StatusOr<Config> config = ParseConfig(R"(
model: {vocab_size: 256, d_model: 32, n_layers: 2, n_heads: 2, n_kv_heads: 1, seq_len: 16,
        residual: {type: vanilla}}
train: {steps: 3, batch_size: 1, microbatches: 2, eval_every: 0}
pipeline: {schedule: 1f1b, workers: 2}
)");
  EXPECT_TRUE(config.ok()) << config.status();
  controller::ControllerOptions o;
  o.workers = 2;
  o.quiet = true;
  absl::StatusOr<std::unique_ptr<controller::Controller>> c =
      controller::Controller::Create(*config, o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

TEST(DashboardServerTest, ServesPageStateAndMetricsOnLoopbackWithoutAToken) {
  std::unique_ptr<controller::Controller> ctl = IdleController();
  absl::StatusOr<std::unique_ptr<DashboardServer>> server =
      DashboardServer::Start(ctl.get(), "127.0.0.1:0", "secret-token");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_FALSE((*server)->requires_token());
  EXPECT_EQ((*server)->url(), absl::StrCat("http://127.0.0.1:", (*server)->port(), "/"));
  httplib::Client client("127.0.0.1", (*server)->port());
  httplib::Result page = client.Get("/");
  ASSERT_TRUE(page) << httplib::to_string(page.error());
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("api/state"), std::string::npos);
  // Self-contained: no URL but the SVG namespace, no external script, style or image.
  std::string body = page->body;
  for (size_t at; (at = body.find("http://www.w3.org/2000/svg")) != std::string::npos;) {
    body.erase(at, 26);
  }
  for (const char* external : {"http://", "https://", "src=", "<link", "@import", "url("}) {
    EXPECT_EQ(body.find(external), std::string::npos) << external;
  }
  httplib::Result state = client.Get("/api/state?since=0");
  ASSERT_TRUE(state);
  EXPECT_EQ(state->status, 200);
  const nlohmann::json doc = nlohmann::json::parse(state->body);
  EXPECT_EQ(doc["job"]["state"], "waiting for workers");
  ASSERT_EQ(doc["workers"].size(), 2u);
  EXPECT_EQ(doc["workers"][0]["health"], "not registered");
  httplib::Result metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), kPrometheusContentType);
  EXPECT_NE(metrics->body.find("\nxhc_step 0\n"), std::string::npos) << metrics->body;
  EXPECT_EQ(client.Get("/nothing-here")->status, 404);
}

TEST(DashboardServerTest, ANonLoopbackAddressRefusesRequestsWithoutTheToken) {
  std::unique_ptr<controller::Controller> ctl = IdleController();
  EXPECT_TRUE(absl::IsInvalidArgument(DashboardServer::Start(ctl.get(), "0.0.0.0:0", "").status()));
  const std::string token = "0123456789abcdef0123456789abcdef";
  absl::StatusOr<std::unique_ptr<DashboardServer>> server =
      DashboardServer::Start(ctl.get(), "0.0.0.0:0", token);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE((*server)->requires_token());
  httplib::Client client("127.0.0.1", (*server)->port());
  for (const char* path : {"/", "/api/state", "/metrics"}) {
    SCOPED_TRACE(path);
    httplib::Result none = client.Get(path);
    ASSERT_TRUE(none);
    EXPECT_EQ(none->status, 401);
    EXPECT_EQ(none->body.find("xhc_"), std::string::npos);
    EXPECT_EQ(client.Get(path, {{"Authorization", "Bearer " + token + "x"}})->status, 401);
    EXPECT_EQ(client.Get(absl::StrCat(path, "?token=", token.substr(1), "0"))->status, 401);
    EXPECT_EQ(client.Get(path, {{"Authorization", "Bearer " + token}})->status, 200);
    EXPECT_EQ(client.Get(absl::StrCat(path, "?token=", token))->status, 200);
  }
}

}  // namespace
}  // namespace xhc::dashboard
