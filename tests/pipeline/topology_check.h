#ifndef XHC_TESTS_PIPELINE_TOPOLOGY_CHECK_H_
#define XHC_TESTS_PIPELINE_TOPOLOGY_CHECK_H_

// What a launch must be shown to have run, beyond matching `xhc train` (which any rank count
// and schedule would): the workers that registered, each rank's stages, and each rank's
// compute actions from its trace against the schedule's own lists for every step. A launcher
// that ignored pipeline.workers or pipeline.schedule fails here.

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "runtime/common/config.h"
#include "runtime/plan/plan.h"
#include "scheduler/schedule.h"
#include "tests/util/run_util.h"

namespace xhc::testing {

// The F, I and W spans a rank's list gives per step, in order ("F0.3"): the CPU worker runs a
// B as I then W, and an overlapped F&B as F, I, W.
inline std::vector<std::string> ComputeSpansPerStep(const std::vector<scheduler::Action>& list) {
  std::vector<std::string> out;
  using scheduler::ActionType;
  for (const scheduler::Action& a : list) {
    const std::string f = absl::StrCat(a.stage_idx, ".", a.microbatch_idx);
    const std::string b = a.type == ActionType::kOverlapFB
                              ? absl::StrCat(a.bwd_stage_idx, ".", a.bwd_microbatch_idx)
                              : f;
    switch (a.type) {
      case ActionType::kForward: out.push_back("F" + f); break;
      case ActionType::kBackward: out.push_back("I" + f), out.push_back("W" + f); break;
      case ActionType::kBackwardInput: out.push_back("I" + f); break;
      case ActionType::kBackwardWeight: out.push_back("W" + f); break;
      case ActionType::kOverlapFB:
        out.push_back("F" + f), out.push_back("I" + b), out.push_back("W" + b);
        break;
      default: break;
    }
  }
  return out;
}

// What was asked: a built-in schedule `type` (with `chunks`), built here by the scheduler
// itself, not through the config and plan code the launch ran (so a launch path that dropped
// the asked type is caught); or, with `type` empty, the CSV the config or `schedule_csv` (the
// --schedule-csv flag's file) names, placed by the plan. `log` is the launch's output, `run`
// its run directory.
struct Asked {
  std::string type;  // "" = a CSV schedule
  int ranks = 1, microbatches = 8, chunks = 1;
  std::string config_path, schedule_csv;
  bool in_order = true;  // the compute spans follow the list (one compute thread)
};

// Stages per rank and lowered lists of what was asked.
inline absl::Status AskedLists(const Asked& asked, std::vector<std::vector<int>>* stages,
                               std::vector<std::vector<scheduler::Action>>* lists) {
  if (!asked.type.empty()) {
    scheduler::ScheduleRequest request;
    request.type = asked.type;
    request.num_ranks = asked.ranks;
    request.num_microbatches = asked.microbatches;
    request.num_chunks = asked.chunks;
    absl::StatusOr<scheduler::Schedule> schedule = scheduler::BuildSchedule(request);
    if (!schedule.ok()) return schedule.status();
    *stages = schedule->rank_stages;
    *lists = schedule->Lower();
    return absl::OkStatus();
  }
  absl::StatusOr<Config> config = LoadConfigFile(asked.config_path);
  if (!config.ok()) return config.status();
  if (!asked.schedule_csv.empty()) config->pipeline.schedule_csv = asked.schedule_csv;
  absl::StatusOr<plan::JobPlan> plan = plan::MakePlan(*config, asked.ranks);
  if (!plan.ok()) return plan.status();
  *stages = plan->schedule.rank_stages;
  *lists = plan->lowered;
  return absl::OkStatus();
}

inline void ExpectTopology(const Asked& asked, int steps, const std::string& log,
                           const std::string& run) {
  const int ranks = asked.ranks;
  std::vector<std::vector<int>> stages;
  std::vector<std::vector<scheduler::Action>> lists;
  const absl::Status built = AskedLists(asked, &stages, &lists);
  ASSERT_TRUE(built.ok()) << built;
  ASSERT_EQ(static_cast<int>(stages.size()), ranks);
  // Registered workers: as many as asked, each rank once (no restarts in these runs).
  const std::regex registered(R"(registered as rank (\d+))");
  std::map<int, int> times;
  for (std::sregex_iterator it(log.begin(), log.end(), registered), end; it != end; ++it) {
    ++times[std::stoi((*it)[1])];
  }
  ASSERT_EQ(static_cast<int>(times.size()), ranks) << "workers that registered";
  for (const auto& [rank, n] : times) EXPECT_EQ(n, 1) << "rank " << rank << " registered";
  // Each rank's stages, as it reports them.
  for (int r = 0; r < ranks; ++r) {
    const std::string want =
        absl::StrCat("[rank ", r, "] registered: stages [", absl::StrJoin(stages[r], ", "), "], ");
    EXPECT_NE(log.find(want), std::string::npos) << "want '" << want << "'";
  }
  // Each rank's compute spans over the run, in the order they started, against its list for
  // every step: the order tells a schedule from another with the same actions (1F1B from
  // GPipe). `in_order` false (a device's two compute streams) compares them as a multiset.
  const std::string trace = ReadText(run + "/trace.json");
  nlohmann::json doc = nlohmann::json::parse(trace, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded()) << run << "/trace.json does not parse";
  const std::regex compute(R"([FIW]\d+\.\d+)");
  std::vector<std::vector<std::pair<double, std::string>>> spans(ranks);
  for (const nlohmann::json& e : doc["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    const std::string name = e.value("name", "");
    if (!std::regex_match(name, compute)) continue;
    const int pid = e.value("pid", -1);
    ASSERT_TRUE(pid >= 0 && pid < ranks) << "a span of rank " << pid;
    spans[pid].push_back({e.value("ts", 0.0), name});
  }
  for (int r = 0; r < ranks; ++r) {
    std::stable_sort(spans[r].begin(), spans[r].end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::string> got, want;
    for (const auto& [ts, name] : spans[r]) got.push_back(name);
    const std::vector<std::string> per_step = ComputeSpansPerStep(lists[r]);
    for (int s = 0; s < steps; ++s) want.insert(want.end(), per_step.begin(), per_step.end());
    if (!asked.in_order) {
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
    }
    EXPECT_EQ(got, want) << "rank " << r << "'s F/I/W spans over " << steps << " steps";
  }
}

}  // namespace xhc::testing

#endif  // XHC_TESTS_PIPELINE_TOPOLOGY_CHECK_H_
