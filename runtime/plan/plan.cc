#include "runtime/plan/plan.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "scheduler/action.h"

namespace xhc::plan {

bool JobPlan::IsCanonicalHolder(int rank, int stage) const {
  const std::vector<int> ranks = schedule.StageToRanks(stage);
  return !ranks.empty() && ranks.front() == rank;
}

namespace {

// The config one replica runs: its share of the micro-batches (train.microbatches /
// data_parallel). Only the schedule sees it; gradients are still scaled by the global count.
absl::StatusOr<Config> ReplicaConfig(const Config& config, int data_parallel) {
  RETURN_IF_ERROR(ValidateDataParallel(data_parallel, config.train.microbatches));
  Config replica = config;
  replica.train.microbatches = config.train.microbatches / data_parallel;
  return replica;
}

// Errors about a replica's micro-batches say that the count is per replica.
absl::Status PerReplica(absl::Status status, int data_parallel, int microbatches) {
  if (status.ok() || data_parallel == 1) return status;
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), " (per replica: train.microbatches ",
                                   microbatches, " / pipeline.data_parallel ", data_parallel, ")"));
}

absl::StatusOr<JobPlan> MakeReplicaPlan(const Config& config, int workers);

}  // namespace

absl::StatusOr<JobPlan> MakePlan(const Config& config, int workers, int data_parallel) {
  if (data_parallel == 0) data_parallel = config.pipeline.data_parallel;
  ASSIGN_OR_RETURN(Config replica, ReplicaConfig(config, data_parallel));
  absl::StatusOr<JobPlan> plan = MakeReplicaPlan(replica, workers);
  if (!plan.ok()) {
    return PerReplica(plan.status(), data_parallel, config.train.microbatches);
  }
  plan->data_parallel = data_parallel;
  return plan;
}

namespace {

absl::StatusOr<JobPlan> MakeReplicaPlan(const Config& config, int workers) {
  if (workers < 1) return absl::InvalidArgumentError("pipeline.workers: must be >= 1");
  if (!config.pipeline.schedule_csv.empty()) {
    const std::string& path = config.pipeline.schedule_csv;
    absl::StatusOr<std::string> text = ReadWholeFile(path);
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat("pipeline.schedule_csv: ", text.status().message()));
    }
    return MakePlanFromCsv(config, workers, *text, path);
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
          *type, " on pipeline.workers = ", workers, ": it needs train.microbatches >= ", min_mbs,
          " (2 x workers); raise train.microbatches or lower pipeline.workers"));
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

}  // namespace

std::string DescribeRankActions(const JobPlan& plan, int rank) {
  std::vector<std::string> parts;
  if (plan.data_parallel > 1) {
    parts.push_back(absl::StrCat("replica ", plan.ReplicaOf(rank), "/", plan.data_parallel, ":"));
  }
  for (const scheduler::Action& a : plan.lowered[plan.PipelineRankOf(rank)]) {
    parts.push_back(absl::StrCat(scheduler::ToString(a), "@", a.peer_rank));
  }
  return absl::StrJoin(parts, " ");
}

}  // namespace xhc::plan
