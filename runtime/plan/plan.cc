#include "runtime/plan/plan.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "scheduler/action.h"

namespace xhc::plan {

bool JobPlan::IsCanonicalHolder(int rank, int stage) const {
  const std::vector<int> ranks = schedule.StageToRanks(stage);
  return !ranks.empty() && ranks.front() == rank;
}

absl::StatusOr<JobPlan> MakePlan(const Config& config, int workers) {
  if (workers < 1) return absl::InvalidArgumentError("pipeline.workers: must be >= 1");
  if (!config.pipeline.schedule_csv.empty()) {
    const std::string& path = config.pipeline.schedule_csv;
    std::ifstream in(path);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("pipeline.schedule_csv: cannot read ", path));
    }
    std::stringstream text;
    text << in.rdbuf();
    return MakePlanFromCsv(config, workers, text.str(), path);
  }
  scheduler::ScheduleRequest request;
  request.type = config.pipeline.schedule;
  request.num_ranks = workers;
  request.num_microbatches = config.train.microbatches;
  request.num_chunks = config.pipeline.chunks;
  // Too few micro-batches is the common mistake: say which keys to change, and to what.
  if (absl::StatusOr<std::string> type = scheduler::CanonicalType(request.type); type.ok()) {
    const int min_mbs = scheduler::MinMicrobatches(*type, workers);
    if (config.train.microbatches < min_mbs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "train.microbatches: ", config.train.microbatches, " is too few for pipeline.schedule ",
          *type, " on pipeline.workers = ", workers, ": it needs train.microbatches >= ",
          min_mbs, " (2 x workers); raise train.microbatches or lower pipeline.workers"));
    }
  }
  absl::StatusOr<scheduler::Schedule> schedule = scheduler::BuildSchedule(request);
  if (!schedule.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pipeline.schedule '", config.pipeline.schedule, "' with pipeline.workers = ", workers,
        ", train.microbatches = ", config.train.microbatches, ": ", schedule.status().message()));
  }
  JobPlan plan;
  plan.schedule = *std::move(schedule);
  plan.lowered = plan.schedule.Lower();
  RETURN_IF_ERROR(PlaceLayers(config, workers, plan));
  return plan;
}

std::string DescribeRankActions(const JobPlan& plan, int rank) {
  std::vector<std::string> parts;
  for (const scheduler::Action& a : plan.lowered[rank]) {
    parts.push_back(absl::StrCat(scheduler::ToString(a), "@", a.peer_rank));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace xhc::plan
