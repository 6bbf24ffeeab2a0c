#ifndef XHC_RUNTIME_PLAN_PLAN_H_
#define XHC_RUNTIME_PLAN_PLAN_H_

// The job plan: config → schedule → stages → layers. The controller computes it to assign
// ranks; every worker recomputes it from the same config and refuses an assignment that
// differs (the plan is a pure function of the config).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"
#include "runtime/model/params.h"
#include "scheduler/schedule.h"

namespace xhc::plan {

struct JobPlan {
  scheduler::Schedule schedule;
  std::vector<model::StageSpec> stages;                 // by global stage index
  std::vector<std::vector<scheduler::Action>> lowered;  // per rank, with communication
  int num_ranks() const { return schedule.num_ranks; }
  // Stage indices rank r holds, ascending.
  const std::vector<int>& StagesOf(int rank) const { return schedule.rank_stages[rank]; }
  // True when rank r's copy of `stage` is the one whose gradient norm, checkpoint shard and
  // parameters count (dualpipe holds every stage twice: the lower rank is canonical).
  bool IsCanonicalHolder(int rank, int stage) const;
};

// Splits L layers over S stages, as evenly as possible; the first stage (embedding) and the
// last (head + LM head + loss) take the smaller shares when the split is uneven.
std::vector<model::StageSpec> SplitLayers(int num_layers, int num_stages);

// Builds the plan for `workers` ranks (config.pipeline.* otherwise). Errors are
// kInvalidArgument naming the config key (pipeline.schedule, pipeline.workers,
// train.microbatches, model.n_layers).
absl::StatusOr<JobPlan> MakePlan(const Config& config, int workers);

// "0F0 1F0 ..." one line per rank: what the controller sends and workers compare.
std::string DescribeRankActions(const JobPlan& plan, int rank);

}  // namespace xhc::plan

#endif  // XHC_RUNTIME_PLAN_PLAN_H_
