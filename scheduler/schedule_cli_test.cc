#include "scheduler/schedule_cli.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace xhc::scheduler {
namespace {

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun RunCli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = RunScheduleCommand(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(ScheduleCli, JsonStatisticsMatchTheFormula) {
  CliRun run =
      RunCli({"--type", "dualpipev", "--ranks", "4", "--microbatches", "10", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  nlohmann::json stats = nlohmann::json::parse(run.out);
  EXPECT_EQ(stats["stages"], 8);
  EXPECT_EQ(stats["bubble"].size(), 4u);
  EXPECT_DOUBLE_EQ(stats["analytic_bubble"].get<double>(), 6.0);  // (8/2-1)(3+2-3)
  for (const auto& b : stats["bubble"]) EXPECT_NEAR(b.get<double>(), 6.0, 0.06);
  EXPECT_EQ(stats["peak_activations"][0], 9);
}

TEST(ScheduleCli, CostsAndCommFlags) {
  CliRun run = RunCli(
      {"--type=1f1b", "--ranks=4", "--microbatches=8", "--costs", "f=2,b=4", "--format=json"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(run.out)["analytic_bubble"].get<double>(), 18.0);
  run = RunCli({"--type", "1f1b", "--ranks", "2", "--microbatches", "4", "--payload-bytes",
                "1048576", "--bandwidth-gbps", "8", "--latency-us", "5", "--format", "json"});
  ASSERT_EQ(run.code, 0) << run.err;
  EXPECT_GT(nlohmann::json::parse(run.out)["exposed_comm"][0].get<double>(), 0.0);
}

TEST(ScheduleCli, TextChromeSvgAndCsvFormats) {
  CliRun text = RunCli({"--type", "zb1p", "--ranks", "2", "--microbatches", "3"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("rank 0: 0F0"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("analytic bubble: 1"), std::string::npos) << text.out;
  CliRun chrome =
      RunCli({"--type", "gpipe", "--ranks", "2", "--microbatches", "2", "--format", "chrome"});
  ASSERT_EQ(chrome.code, 0);
  EXPECT_TRUE(nlohmann::json::parse(chrome.out).contains("traceEvents"));
  CliRun svg =
      RunCli({"--type", "dualpipe", "--ranks", "2", "--microbatches", "4", "--format", "svg"});
  ASSERT_EQ(svg.code, 0);
  EXPECT_EQ(svg.out.rfind("<svg", 0), 0u);
  CliRun csv =
      RunCli({"--type", "1f1b", "--ranks", "2", "--microbatches", "2", "--format", "torch-csv"});
  ASSERT_EQ(csv.code, 0);
  EXPECT_EQ(csv.out, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
}

TEST(ScheduleCli, ZBVSvgAndStatistics) {
  CliRun svg = RunCli({"--type", "zbv", "--ranks", "4", "--microbatches", "8", "--format", "svg"});
  ASSERT_EQ(svg.code, 0) << svg.err;
  EXPECT_EQ(svg.out.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.out.find("#fcd9a8"), std::string::npos);  // forwards down the V
  EXPECT_NE(svg.out.find("#e8892b"), std::string::npos);  // forwards back up
  CliRun json = RunCli({"--type", "zbv", "--ranks", "4", "--microbatches", "8", "--costs",
                        "f=1,b=2,i=1,w=1", "--format", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  nlohmann::json stats = nlohmann::json::parse(json.out);
  EXPECT_EQ(stats["stages"], 8);
  EXPECT_DOUBLE_EQ(stats["analytic_bubble"].get<double>(), 3.0);  // (R-1)F
  for (const auto& b : stats["bubble"]) EXPECT_NEAR(b.get<double>(), 3.0, 0.03);
  for (const auto& p : stats["peak_activations"]) EXPECT_EQ(p, 8);
}

// Peak activation memory in bytes: the peak count of held (stage, micro-batch) activations
// times the bytes each keeps. 1F1B on 4 ranks holds 4, 3, 2, 1; ZB-V 2R = 8 on every rank:
// its chunks are half-size (the same layer activations as 1F1B's first rank), but each keeps
// its own boundary state, so the state bytes are twice 1F1B's first rank.
TEST(ScheduleCli, PeakActivationMemoryInBytes) {
  CliRun json = RunCli({"--type", "1f1b", "--ranks", "4", "--microbatches", "8",
                        "--activation-bytes", "1000", "--format", "json"});
  ASSERT_EQ(json.code, 0) << json.err;
  nlohmann::json stats = nlohmann::json::parse(json.out);
  EXPECT_EQ(stats["peak_activation_bytes"], nlohmann::json({4000.0, 3000.0, 2000.0, 1000.0}));
  CliRun text =
      RunCli({"--type", "zbv", "--ranks", "4", "--microbatches", "8", "--activation-bytes=512"});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("peak activation memory per rank: 4096 4096 4096 4096 bytes (8, 8, 8, "
                          "8 x 512 bytes of state kept per stage and micro-batch)"),
            std::string::npos)
      << text.out;
  // Not given: no line (the count alone is still reported).
  CliRun plain = RunCli({"--type", "zbv", "--ranks", "4", "--microbatches", "8"});
  EXPECT_EQ(plain.out.find("peak activation memory"), std::string::npos) << plain.out;
  EXPECT_EQ(
      RunCli({"--type", "1f1b", "--ranks", "2", "--microbatches", "2", "--activation-bytes", "-1"})
          .code,
      2);
  // A foreign CSV's memory too.
  const std::string csv = testing::TempDir() + "/bytes.csv";
  std::ofstream(csv) << "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";
  CliRun validated = RunCli({"--validate-csv", csv, "--activation-bytes", "100"});
  ASSERT_EQ(validated.code, 0) << validated.err;
  EXPECT_NE(validated.out.find("peak activation memory per rank: 200 100 bytes (2, 1 x 100 "),
            std::string::npos)
      << validated.out;
}

TEST(ScheduleCli, ValidatesAForeignCsv) {
  const std::string dir = testing::TempDir();
  const std::string good = dir + "/good.csv", bad = dir + "/bad.csv";
  CliRun written = RunCli({"--type", "dualpipe", "--ranks", "4", "--microbatches", "8", "--format",
                           "torch-csv", "--lowered", "--out", good});
  ASSERT_EQ(written.code, 0) << written.err;
  CliRun ok = RunCli({"--validate-csv", good});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("valid: 4 ranks, 4 stages, 8 micro-batches"), std::string::npos);
  std::ofstream(bad) << "0F0,0B0\n1B0,1F0\n";  // rank 1 runs its backward first
  CliRun fail = RunCli({"--validate-csv", bad});
  EXPECT_EQ(fail.code, 1);
  EXPECT_NE(fail.err.find("deadlock"), std::string::npos) << fail.err;
  EXPECT_NE(fail.err.find(">>1B0<<"), std::string::npos) << fail.err;
}

TEST(ScheduleCli, HelpPrintsTheUsageAndExitsZero) {
  for (const char* flag : {"--help", "-h"}) {
    CliRun run = RunCli({"--type", "1f1b", flag});
    EXPECT_EQ(run.code, 0) << flag;
    EXPECT_EQ(run.out.rfind("usage: xhc schedule", 0), 0u) << run.out;
    EXPECT_EQ(run.err, "") << flag;
  }
}

TEST(ScheduleCli, BadCommandLinesExitTwoWithAReason) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--type", "dualpipe", "--ranks", "3", "--microbatches", "12"}, "even number of ranks"},
      {{"--type", "1f1b", "--ranks", "x", "--microbatches", "4"}, "not an integer"},
      {{"--ranks", "2"}, "--type is required"},
      {{"--type", "1f1b", "--format", "png"}, "not one of"},
      {{"--type", "1f1b", "--costs", "q=1"}, "unknown key 'q'"},
      {{"--bogus"}, "unknown argument"},
      {{"--type"}, "needs a value"},
  };
  for (const auto& [args, message] : cases) {
    CliRun run = RunCli(args);
    EXPECT_EQ(run.code, 2) << message;
    EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("usage"), std::string::npos) << run.err;
  }
}

}  // namespace
}  // namespace xhc::scheduler
