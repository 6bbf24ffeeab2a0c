#include "runtime/plan/plan.h"

#include <algorithm>
#include <cmath>
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

std::vector<model::StageSpec> SplitLayers(int num_layers, int num_stages) {
  std::vector<int> counts(num_stages, num_layers / num_stages);
  // Hand the remainder to the stages nearest the middle: the ends also carry the embedding
  // and the head.
  std::vector<int> order(num_stages);
  for (int s = 0; s < num_stages; ++s) order[s] = s;
  const double mid = (num_stages - 1) / 2.0;
  std::stable_sort(order.begin(), order.end(), [mid](int a, int b) {
    return std::abs(a - mid) < std::abs(b - mid);
  });
  for (int i = 0; i < num_layers % num_stages; ++i) ++counts[order[i]];
  std::vector<model::StageSpec> specs;
  int first = 0;
  for (int s = 0; s < num_stages; ++s) {
    specs.push_back({first, counts[s], s == 0, s == num_stages - 1});
    first += counts[s];
  }
  return specs;
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

absl::Status PlaceLayers(const Config& config, int workers, JobPlan& plan) {
  if (plan.schedule.num_stages > config.model.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.n_layers: ", config.model.n_layers, " layers cannot fill ",
        plan.schedule.num_stages, " pipeline stages (", plan.schedule.type, " on ", workers,
        " workers); use more layers or fewer pipeline.workers"));
  }
  // xhc_flash with window 4 shares one routing decision across two layers: stages hold whole
  // layer pairs, so no window straddles a stage boundary (spec 4.5).
  const ResidualConfig& res = config.model.residual;
  const int unit = res.type == ResidualType::kXhcFlash ? res.window / 2 : 1;
  if (plan.schedule.num_stages * unit > config.model.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model.residual.window: ", res.window, " keeps ", unit, " layers together, so ",
        config.model.n_layers, " layers give at most ", config.model.n_layers / unit,
        " pipeline stages, but ", plan.schedule.type, " on ", workers, " workers needs ",
        plan.schedule.num_stages, "; use window: 2, more model.n_layers, or fewer "
        "pipeline.workers"));
  }
  plan.stages = SplitLayers(config.model.n_layers / unit, plan.schedule.num_stages);
  for (model::StageSpec& s : plan.stages) s.first_layer *= unit, s.num_layers *= unit;
  return absl::OkStatus();
}

std::string DescribeRankActions(const JobPlan& plan, int rank) {
  std::vector<std::string> parts;
  for (const scheduler::Action& a : plan.lowered[rank]) {
    parts.push_back(absl::StrCat(scheduler::ToString(a), "@", a.peer_rank));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace xhc::plan
