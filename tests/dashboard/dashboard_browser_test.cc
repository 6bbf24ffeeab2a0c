// The dashboard in a real browser: a real job under `xhc launch --http 127.0.0.1:0`, and
// headless Chromium (Debian's `chromium`) loading the page after a few steps. Its DOM (the
// charts are inline SVG, so every polyline carries its point count) must have loss,
// validation-loss, tokens/s, exposed-communication, peer-wait and bubble curves with points, every
// worker listed alive, the last step's timeline with spans from both ranks and a checkpoint
// row; its screenshot must not be one colour. A second job has a worker SIGKILLed: the page
// must then show the recovery. Screenshots are left in the test's outputs.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "tests/dashboard/dashboard_job.h"
#include "tests/dashboard/png_pixels.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {
namespace fs = std::filesystem;

constexpr char kChromium[] = "/usr/bin/chromium";

// Runs headless Chromium on `url` with `mode` (--dump-dom, or --screenshot=FILE); stdout to
// `out`. Virtual time lets the page's 1 s poll run a few times before the dump.
int Chromium(const std::string& dir, const std::string& mode, const std::string& url,
             const std::string& out) {
  // In a subshell: RunCommand sends the subshell's own output to the log.
  return RunCommand(absl::StrCat("(HOME=", dir, " timeout 45 ", kChromium,
                                 " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage"
                                 " --no-first-run --hide-scrollbars --user-data-dir=",
                                 dir, "/chrome --window-size=1400,1500 --virtual-time-budget=4000 ",
                                 mode, " '", url, "' >", out, ")"),
                    dir + "/chromium.log");
}

// The point count of the polyline of `series` in the dumped DOM (-1 if absent).
int SeriesPoints(const std::string& dom, const std::string& series) {
  std::smatch m;
  const std::regex re("data-series=\"" + series + "\" data-n=\"([0-9]+)\"");
  return std::regex_search(dom, m, re) ? std::stoi(m[1]) : -1;
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++n;
  }
  return n;
}

void ExpectNotBlank(const std::string& png) {
  absl::StatusOr<PngStats> st = ReadPngStats(png);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->width, 1400);
  EXPECT_GT(st->distinct_colors, 16) << png;
  EXPECT_LT(st->most_common_share, 0.95) << png;
  std::printf("screenshot %s: %dx%d, %d colours, the commonest on %.1f%% of pixels\n", png.c_str(),
              st->width, st->height, st->distinct_colors, 100 * st->most_common_share);
}

class DashboardBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kChromium, X_OK) != 0) {
      XHC_SKIP_OR_FAIL(kChromium << " not installed (Debian package chromium; setup.sh)");
    }
  }
  std::string dir_ = FreshDir("dashboard_browser");
};

TEST_F(DashboardBrowser, PageShowsCurvesWorkersTimelineAndCheckpoints) {
  DashboardJob job(dir_, "127.0.0.1:0");
  absl::StatusOr<int> port = job.Port();
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_TRUE(job.WaitForStepAndCheckpoint(9, 30)) << job.log();
  const std::string url = absl::StrCat("http://127.0.0.1:", *port, "/");
  const std::string dom_file = dir_ + "/dom.html";
  ASSERT_EQ(Chromium(dir_, "--dump-dom", url, dom_file), 0) << ReadText(dir_ + "/chromium.log");
  const std::string png = OutputsDir() + "/dashboard.png";
  ASSERT_EQ(Chromium(dir_, "--screenshot=" + png, url, dir_ + "/shot.out"), 0)
      << ReadText(dir_ + "/chromium.log");
  const std::string metrics = ReadText(job.run_dir() + "/metrics.jsonl");
  job.Stop();
  const std::string dom = ReadText(dom_file);
  ASSERT_NE(dom.find("data-polls="), std::string::npos) << "the page never got api/state:\n"
                                                        << dom.substr(0, 3000);
  EXPECT_GE(SeriesPoints(dom, "loss"), 9) << dom;
  EXPECT_GE(SeriesPoints(dom, "val_loss"), 3);
  EXPECT_GE(SeriesPoints(dom, "tokens_per_s"), 9);
  for (const char* s : {"exposed_comm rank 0", "exposed_comm rank 1", "peer_wait rank 0",
                        "peer_wait rank 1", "bubble rank 0", "bubble rank 1"}) {
    EXPECT_GE(SeriesPoints(dom, s), 9) << s;
  }
  EXPECT_NE(dom.find("class=\"worker\" data-rank=\"0\" data-health=\"alive\""), std::string::npos);
  EXPECT_NE(dom.find("class=\"worker\" data-rank=\"1\" data-health=\"alive\""), std::string::npos);
  EXPECT_EQ(Count(dom, "class=\"worker\""), 2);
  EXPECT_GT(Count(dom, "class=\"span\" data-rank=\"0\""), 0);
  EXPECT_GT(Count(dom, "class=\"span\" data-rank=\"1\""), 0);
  EXPECT_GE(Count(dom, "class=\"checkpoint\""), 1);
  // The step the page shows is one metrics.jsonl had when the job was stopped.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex("data-step=\"([0-9]+)\"")));
  EXPECT_GE(std::stoi(m[1]), 9);
  EXPECT_NE(metrics.find(absl::StrCat("\"step\": ", m[1].str(), ",")), std::string::npos);
  ExpectNotBlank(png);
}

TEST_F(DashboardBrowser, PageShowsAKilledWorkersRecovery) {
  DashboardJob job(dir_, "127.0.0.1:0");
  absl::StatusOr<int> port = job.Port();
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_TRUE(job.WaitForStepAndCheckpoint(9, 30)) << job.log();
  // The victim's pid, as the dashboard reports it.
  const nlohmann::json before = nlohmann::json::parse(HttpGet(*port, "/api/state").body);
  const int victim = before["workers"][1]["pid"];
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  // Recovered: a recovery recorded, every rank alive again and steps past the failure.
  bool recovered = false;
  nlohmann::json s;
  for (int i = 0; i < 300 && !recovered; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const HttpReply r = HttpGet(*port, "/api/state?since=1000000");
    if (r.status != 200) continue;
    s = nlohmann::json::parse(r.body);
    recovered = !s["recoveries"].empty() && s["job"]["state"] == "running" &&
                s["job"]["step"].get<int>() > s["recoveries"][0]["failed_step"].get<int>() + 3;
  }
  ASSERT_TRUE(recovered) << job.log();
  EXPECT_EQ(s["recoveries"][0]["replaced_ranks"], nlohmann::json::array({1}));
  const std::string url = absl::StrCat("http://127.0.0.1:", *port, "/");
  const std::string dom_file = dir_ + "/dom.html";
  ASSERT_EQ(Chromium(dir_, "--dump-dom", url, dom_file), 0) << ReadText(dir_ + "/chromium.log");
  const std::string png = OutputsDir() + "/dashboard_recovery.png";
  ASSERT_EQ(Chromium(dir_, "--screenshot=" + png, url, dir_ + "/shot.out"), 0)
      << ReadText(dir_ + "/chromium.log");
  job.Stop();
  const std::string dom = ReadText(dom_file);
  EXPECT_EQ(Count(dom, "class=\"recovery\""), 1) << dom;
  EXPECT_GE(Count(dom, "class=\"recovery-marker\""), 5) << "one per chart";
  EXPECT_NE(dom.find("<b id=\"generation\">1</b>"), std::string::npos);
  EXPECT_NE(dom.find("class=\"worker\" data-rank=\"1\" data-health=\"alive\""), std::string::npos);
  ExpectNotBlank(png);
}

// On a non-loopback address the page opened with ?token= passes the token on to api/state
// (the page's polls succeed); without it the server refuses the page itself.
TEST_F(DashboardBrowser, PageOpenedWithTheTokenWorksOnANonLoopbackAddress) {
  DashboardJob job(dir_, "0.0.0.0:0");
  absl::StatusOr<int> port = job.Port();
  ASSERT_TRUE(port.ok()) << port.status();
  ASSERT_TRUE(job.WaitForStepAndCheckpoint(5, 30)) << job.log();
  const std::string url = absl::StrCat("http://127.0.0.1:", *port, "/");
  ASSERT_EQ(Chromium(dir_, "--dump-dom", url + "?token=" + job.token(), dir_ + "/dom.html"), 0)
      << ReadText(dir_ + "/chromium.log");
  ASSERT_EQ(Chromium(dir_, "--dump-dom", url, dir_ + "/refused.html"), 0)
      << ReadText(dir_ + "/chromium.log");
  job.Stop();
  const std::string dom = ReadText(dir_ + "/dom.html");
  EXPECT_NE(dom.find("data-polls="), std::string::npos) << dom.substr(0, 3000);
  EXPECT_GE(SeriesPoints(dom, "loss"), 5);
  const std::string refused = ReadText(dir_ + "/refused.html");
  EXPECT_NE(refused.find("401"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("data-series"), std::string::npos);
}

}  // namespace
}  // namespace xhc::testing
