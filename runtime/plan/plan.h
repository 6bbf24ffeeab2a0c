#ifndef XHC_RUNTIME_PLAN_PLAN_H_
#define XHC_RUNTIME_PLAN_PLAN_H_

// The job plan: config → schedule → stages → layers. The controller computes it to assign
// ranks; every worker recomputes it from the same config and refuses an assignment that
// differs (the plan is a pure function of the config).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"
#include "runtime/model/params.h"
#include "scheduler/schedule.h"

namespace xhc::plan {

struct JobPlan {
  scheduler::Schedule schedule;
  // The PyTorch CSV the schedule was read from ("" for a built-in type): the controller hands
  // it to the workers, which need no copy of the file.
  std::string schedule_csv;
  std::vector<model::StageSpec> stages;                 // by global stage index
  std::vector<std::vector<scheduler::Action>> lowered;  // per pipeline rank, with communication
  // Data parallelism: `data_parallel` replicas of the pipeline above. The job's (world) rank
  // g is pipeline rank g % num_ranks() of replica g / num_ranks(); the schedule, `lowered`
  // and the stage placement are per replica and speak pipeline ranks, and each replica runs
  // schedule.num_microbatches micro-batches (train.microbatches / data_parallel).
  int data_parallel = 1;
  int num_ranks() const { return schedule.num_ranks; }  // pipeline ranks per replica
  int world_size() const { return data_parallel * schedule.num_ranks; }
  int ReplicaOf(int world_rank) const { return world_rank / schedule.num_ranks; }
  int PipelineRankOf(int world_rank) const { return world_rank % schedule.num_ranks; }
  int WorldRank(int replica, int pipeline_rank) const {
    return replica * schedule.num_ranks + pipeline_rank;
  }
  // The sampler's (global) index of replica-local micro-batch `mb`: replicas take contiguous
  // blocks, so replica 0 holds the first ones and the replicas' partial gradient sums, added
  // in replica order, group the micro-batches in single-process order.
  int GlobalMicrobatch(int replica, int mb) const {
    return replica * schedule.num_microbatches + mb;
  }
  // Stage indices pipeline rank r holds, ascending.
  const std::vector<int>& StagesOf(int rank) const { return schedule.rank_stages[rank]; }
  // True when pipeline rank r's copy of `stage` is the one whose gradient norm, checkpoint
  // shard and parameters count (dualpipe holds every stage twice: the lower rank is
  // canonical). Within a replica; replica 0's canonical copy is the job's.
  bool IsCanonicalHolder(int rank, int stage) const;
};

// Splits L layers over S stages. `first` / `last` (when set and S > 1) pin the first
// stage's (embedding) and the last stage's (head + LM head + loss) layer counts; the other
// stages share the rest as evenly as possible, the ones nearest the middle taking the
// remainder (unpinned ends take the smaller shares). Requires pins that leave every other
// stage at least one layer and no layer over (PlaceLayers checks).
std::vector<model::StageSpec> SplitLayers(int num_layers, int num_stages,
                                          std::optional<int> first = std::nullopt,
                                          std::optional<int> last = std::nullopt);

// Builds the plan for `workers` pipeline ranks per replica and `data_parallel` replicas (0:
// pipeline.data_parallel; config.pipeline.* otherwise). Errors are kInvalidArgument naming
// the config key (pipeline.schedule, pipeline.workers, pipeline.data_parallel,
// train.microbatches, model.n_layers). With pipeline.schedule_csv set, reads that file and
// returns MakePlanFromCsv (kNotFound when it cannot be read).
absl::StatusOr<JobPlan> MakePlan(const Config& config, int workers, int data_parallel = 0);

// The plan of a PyTorch-format schedule CSV (scheduler/torch_csv.h): compute-only rows get
// their sends and receives inserted (Schedule::Lower), rows with SEND/RECV run as written.
// Stage placement is read from where each forward runs. Refused (kInvalidArgument, or
// kFailedPrecondition for a deadlock; the message carries the validator's rank x step grid)
// when the CSV does not parse, its rows are not pipeline.workers, its micro-batches are not
// train.microbatches, or the validator rejects it. `source` names the CSV in messages.
absl::StatusOr<JobPlan> MakePlanFromCsv(const Config& config, int workers,
                                        const std::string& csv_text, const std::string& source,
                                        int data_parallel = 1);

// Fills plan.stages: the model's layers over plan.schedule's stages (SplitLayers with
// pipeline.first_stage_layers / last_stage_layers, whole layer pairs for xhc_flash window 4).
// kInvalidArgument naming model.n_layers, model.residual.window or the pinning keys when the
// layers cannot fill the stages (a middle stage would be empty, layers would be left over,
// a pinned count cuts a window pair).
absl::Status PlaceLayers(const Config& config, int workers, JobPlan& plan);

// "3, 1": the layer counts of `stages`, in that order (for logs and manifests).
std::string DescribeStageLayers(const JobPlan& plan, const std::vector<int>& stages);

// "0F0 1F0 ..." for world rank `rank` (its pipeline rank's list, prefixed by its replica when
// data_parallel > 1): what the controller sends and workers compare.
std::string DescribeRankActions(const JobPlan& plan, int rank);

}  // namespace xhc::plan

#endif  // XHC_RUNTIME_PLAN_PLAN_H_
