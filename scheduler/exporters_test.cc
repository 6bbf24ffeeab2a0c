#include "scheduler/exporters.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "gtest/gtest.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace xhc::scheduler {
namespace {

struct SimRun {
  Schedule schedule;
  SimResult sim;
};

SimRun Simulated(const ScheduleRequest& req) {
  absl::StatusOr<Schedule> s = BuildSchedule(req);
  EXPECT_TRUE(s.ok()) << s.status();
  SimCosts costs;
  costs.latency_us = 50;  // non-zero so receives have a visible span
  absl::StatusOr<SimResult> sim = Simulate(*s, costs);
  EXPECT_TRUE(sim.ok()) << sim.status();
  return {*s, *sim};
}

TEST(ChromeTrace, ProcessPerRankTracksAndPairedFlows) {
  SimRun run = Simulated({"dualpipe", 4, 8, 1});
  nlohmann::json doc = nlohmann::json::parse(ChromeTraceJson(run.schedule, run.sim));
  std::map<int, int> compute_per_rank;
  std::map<int, int> flow_starts, flow_ends;  // id -> count
  int processes = 0;
  for (const auto& ev : doc["traceEvents"]) {
    const std::string ph = ev["ph"];
    if (ph == "M" && ev["name"] == "process_name") ++processes;
    if (ph == "X" && ev["tid"] == 0) ++compute_per_rank[ev["pid"].get<int>()];
    if (ph == "s") ++flow_starts[ev["id"].get<int>()];
    if (ph == "f") ++flow_ends[ev["id"].get<int>()];
  }
  EXPECT_EQ(processes, 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(compute_per_rank[r], static_cast<int>(run.schedule.rank_actions[r].size()));
  }
  // Every send has exactly one arrow that lands on its receive.
  EXPECT_FALSE(flow_starts.empty());
  EXPECT_EQ(flow_starts, flow_ends);
  for (const auto& [id, n] : flow_starts) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(doc["otherData"]["schedule"], "dualpipe");
}

TEST(Svg, OneBoxPerComputeHalfAndOutlinedPairs) {
  SimRun run = Simulated({"dualpipev", 2, 4, 1});
  const std::string svg = SvgTimeline(run.schedule, run.sim);
  ASSERT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  int boxes = 0, outlines = 0;
  for (size_t pos = 0; (pos = svg.find("<rect", pos)) != std::string::npos; ++pos) {
    if (svg.compare(svg.find("fill=", pos), 11, "fill=\"none\"") == 0) {
      ++outlines;
    } else {
      ++boxes;
    }
  }
  int compute = 0, pairs = 0;
  for (const auto& list : run.schedule.rank_actions) {
    for (const Action& a : list) {
      ++compute;
      pairs += a.type == ActionType::kOverlapFB;
    }
  }
  EXPECT_GT(pairs, 0);
  EXPECT_EQ(outlines, pairs);
  EXPECT_EQ(boxes, compute + pairs);  // a pair is two half boxes
  // Both directions of the V appear in different shades.
  EXPECT_NE(svg.find("#fcd9a8"), std::string::npos);
  EXPECT_NE(svg.find("#e8892b"), std::string::npos);
}

TEST(Direction, FollowsEntryEndAndVShape) {
  absl::StatusOr<Schedule> dual = BuildSchedule({"dualpipe", 2, 4, 1});
  absl::StatusOr<Schedule> v = BuildSchedule({"dualpipev", 2, 4, 1});
  ASSERT_TRUE(dual.ok() && v.ok());
  EXPECT_EQ(DirectionOf(*dual, 0, 1), 0);
  EXPECT_EQ(DirectionOf(*dual, 0, 2), 1);
  EXPECT_EQ(DirectionOf(*v, 1, 0), 0);
  EXPECT_EQ(DirectionOf(*v, 2, 0), 1);
}

// The left edge of the first box of each fill colour, per row (rank), read back from the SVG.
std::map<std::string, std::map<double, double>> FirstBoxes(const std::string& svg) {
  std::map<std::string, std::map<double, double>> first;  // fill -> y -> min x
  for (size_t pos = 0; (pos = svg.find("<rect x=\"", pos)) != std::string::npos; ++pos) {
    const double x = std::stod(svg.substr(pos + 9));
    const size_t y_at = svg.find("y=\"", pos) + 3;
    const double y = std::stod(svg.substr(y_at));
    const size_t fill_at = svg.find("fill=\"", pos) + 6;
    const std::string fill = svg.substr(fill_at, svg.find('"', fill_at) - fill_at);
    auto [it, fresh] = first[fill].emplace(y, x);
    if (!fresh) it->second = std::min(it->second, x);
  }
  return first;
}

TEST(Svg, ZBVDrawsTheV) {
  SimRun run = Simulated({"zbv", 4, 8, 1});
  auto first = FirstBoxes(SvgTimeline(run.schedule, run.sim));
  // Forwards down the V (light orange) start later on every lower rank; forwards back up
  // (dark orange) start earlier on every lower rank: the two arms of the V.
  const auto& down = first["#fcd9a8"];
  const auto& up = first["#e8892b"];
  ASSERT_EQ(down.size(), 4u);
  ASSERT_EQ(up.size(), 4u);
  for (auto d = down.begin(), u = up.begin(); std::next(d) != down.end(); ++d, ++u) {
    EXPECT_LT(d->second, std::next(d)->second) << "down arm at row y=" << d->first;
    EXPECT_GT(u->second, std::next(u)->second) << "up arm at row y=" << u->first;
  }
  // Split backwards: input grads (teal) and weight grads (green) in both shades.
  for (const char* fill : {"#a4e0d6", "#1f9a8a", "#c4e6b4", "#4f9a3a"}) {
    EXPECT_EQ(first[fill].size(), 4u) << fill;
  }
}

}  // namespace
}  // namespace xhc::scheduler
