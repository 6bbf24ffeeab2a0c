// `xhc study` end to end with real processes on a tiny config: the report's main table is
// parsed back and checked (every schedule present, bubbles are fractions, the infeasible
// runs are reported as failures rather than aborting the study), charts and traces exist, and
// the simulator agrees with the published formulas under uniform costs.
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "runtime/lab/study/bubbles.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

const char* const kSchedules[] = {"gpipe", "1f1b", "zb1p", "dualpipe", "dualpipev"};

std::string StudyYaml(const std::string& corpus) {
  // M = 2 is below DualPipe's and DualPipeV-on-2-ranks' minimum (2R): those runs must fail
  // and be reported; M = 4 runs every schedule.
  return absl::StrCat(
      "study: {schedules: [gpipe, 1f1b, zb1p, dualpipe, dualpipev], residuals: [vanilla, xhc],\n"
      "        devices: 2, stages: 2, microbatch_factors: [1, 2], steps: 3, warmup_steps: 1,\n"
      "        simulate_ranks: [4], run_timeout_s: 30}\n"
      "job:\n"
      "  model: {d_model: 16, n_layers: 4, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,\n"
      "          residual: {type: xhc, n_streams: 16, n_active: 4, n_fixed: 2,\n"
      "                     conv_kernels: [2, 3], sinkhorn_iters: 4}}\n"
      "  optim: {lr: 0.01, warmup_steps: 2}\n"
      "  train: {batch_size: 2, seed: 5}\n"
      "  data: {train: ",
      corpus, "}\n");
}

// The rows of the first markdown table after `heading`, as cells keyed by column name.
std::vector<std::map<std::string, std::string>> TableAfter(const std::string& md,
                                                           const std::string& heading) {
  std::vector<std::map<std::string, std::string>> rows;
  const size_t at = md.find(heading);
  if (at == std::string::npos) return rows;
  std::vector<std::string> header;
  for (absl::string_view line : absl::StrSplit(md.substr(at), '\n')) {
    if (!absl::StartsWith(line, "|")) {
      if (!header.empty()) break;
      continue;
    }
    std::vector<std::string> cells;
    for (absl::string_view c : absl::StrSplit(line.substr(1, line.size() - 2), '|')) {
      cells.emplace_back(absl::StripAsciiWhitespace(c));
    }
    if (header.empty()) {
      header = cells;
      continue;
    }
    if (cells[0].rfind("---", 0) == 0) continue;
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i) row[header[i]] = cells[i];
    rows.push_back(row);
  }
  return rows;
}

std::vector<double> PerRank(const std::string& cell) {
  std::vector<double> values;
  for (absl::string_view part : absl::StrSplit(cell, " / ")) {
    double v;
    EXPECT_TRUE(absl::SimpleAtod(part, &v)) << "not a number: '" << part << "' in " << cell;
    values.push_back(v);
  }
  return values;
}

TEST(StudyE2E, TinyStudyReportIsConsistent) {
  const std::string dir = FreshDir("study");
  std::string text;
  // The validation split takes every 20th block of the corpus: it needs ~100 KB.
  for (int i = 0; i < 5000; ++i)
    absl::StrAppend(&text, "Bubbles shrink as stages overlap ", i, ".\n");
  WriteText(dir + "/corpus.txt", text);
  WriteText(dir + "/study.yaml", StudyYaml(dir + "/corpus.txt"));
  const std::string log = dir + "/log.txt", out = dir + "/out";
  ASSERT_EQ(RunCommand(
                absl::StrCat(XhcBinary(), " study --config ", dir, "/study.yaml --out ", out), log),
            0)
      << ReadText(log);
  EXPECT_NE(ReadText(log).find("[1/"), std::string::npos) << "no progress lines";
  const std::string md = ReadText(out + "/report.md");
  const auto rows = TableAfter(md, "## All runs");
  ASSERT_EQ(rows.size(), 2u * 2 * 6) << md;  // residual x M x (5 equal-device + dualpipev R1)
  std::set<std::string> ok_at_m4, failed;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.at("run"));
    if (row.at("status") != "ok") {
      failed.insert(row.at("run"));
      continue;
    }
    if (row.at("M") == "4") ok_at_m4.insert(row.at("schedule"));
    const int ranks = std::stoi(row.at("R"));
    for (const char* col : {"bubble measured", "bubble simulated", "exposed comm"}) {
      const std::vector<double> v = PerRank(row.at(col));
      EXPECT_EQ(static_cast<int>(v.size()), ranks) << col;
      for (double x : v) EXPECT_TRUE(x >= 0 && x <= 1) << col << " = " << x;
    }
    double tps;
    ASSERT_TRUE(absl::SimpleAtod(row.at("tokens/s"), &tps));
    EXPECT_GT(tps, 0);
    EXPECT_TRUE(
        std::filesystem::exists(absl::StrCat(out, "/traces/", row.at("run"), ".trace.json")));
  }
  for (const char* s : kSchedules) EXPECT_TRUE(ok_at_m4.count(s)) << s << " missing at M=4";
  EXPECT_TRUE(failed.count("xhc-dualpipe-R2-M2")) << "M < 2R must fail and be reported";
  EXPECT_NE(md.find("### xhc-dualpipe-R2-M2"), std::string::npos) << "failure section missing";
  for (const char* q : {"## Q1", "## Q2", "## Q3", "## Q4", "## Q5", "**Findings.**"}) {
    EXPECT_NE(md.find(q), std::string::npos) << q;
  }
  for (const char* chart : {"bubble_by_schedule", "throughput", "measured_vs_simulated"}) {
    for (const char* ext : {".svg", ".png", ".pdf"}) {
      EXPECT_GT(ReadText(absl::StrCat(out, "/charts/", chart, ext)).size(), 100u) << chart << ext;
    }
  }
  const auto results = nlohmann::json::parse(ReadText(out + "/results.json"));
  EXPECT_EQ(results["runs"].size(), rows.size());
}

// With uniform costs and free communication, the simulator reproduces the formula on every
// rank for every schedule (F&B = F + B, as the CPU worker runs it).
TEST(StudyE2E, SimulatedMatchesAnalyticUnderUniformCosts) {
  const study::StageCosts uniform{1.0, 1.0, 1.0, 1};  // F = I = W, as the formulas assume
  for (const char* s : kSchedules) {
    // The published formulas send a backward's output at the end of the whole action; the
    // CPU worker sends it when its piece ends (SimCosts::sequential_pieces, which the study
    // sets and runtime/lab/study's unit test checks against the formulas separately).
    scheduler::SimCosts atomic = study::CostsFrom(uniform, 0, -1);
    atomic.sequential_pieces = false;
    auto b = study::ComputeModelBubbles(s, 4, 8, atomic);
    ASSERT_TRUE(b.ok()) << s << ": " << b.status();
    ASSERT_EQ(b->analytic.size(), b->simulated.size()) << s;
    for (size_t r = 0; r < b->simulated.size(); ++r) {
      EXPECT_NEAR(b->simulated[r], b->analytic[r], 1e-9) << s << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace xhc::testing
