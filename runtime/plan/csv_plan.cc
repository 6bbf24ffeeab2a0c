// MakePlanFromCsv: a job plan from a PyTorch-format schedule CSV, refused before any worker
// starts unless the validator accepts it for this job.
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "runtime/plan/plan.h"
#include "scheduler/torch_csv.h"
#include "scheduler/validator.h"

namespace xhc::plan {
namespace {

// Keeps the code (kFailedPrecondition marks a deadlock) and prefixes the key and file.
absl::Status Refuse(const std::string& source, const absl::Status& why) {
  return absl::Status(why.code(),
                      absl::StrCat("pipeline.schedule_csv ", source, ": ", why.message()));
}

bool HasComm(const std::vector<std::vector<scheduler::Action>>& lists) {
  for (const auto& list : lists) {
    for (const scheduler::Action& a : list) {
      if (a.IsComm()) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<JobPlan> MakePlanFromCsv(const Config& full_config, int workers,
                                        const std::string& csv_text, const std::string& source,
                                        int data_parallel) {
  // The CSV is one replica's schedule: it covers train.microbatches / data_parallel.
  if (absl::Status st = ValidateDataParallel(data_parallel, full_config.train.microbatches);
      !st.ok()) {
    return st;
  }
  Config config = full_config;
  config.train.microbatches /= data_parallel;
  absl::StatusOr<std::vector<std::vector<scheduler::Action>>> lists =
      scheduler::ReadTorchCsv(csv_text);
  if (!lists.ok()) return Refuse(source, lists.status());
  if (static_cast<int>(lists->size()) != workers) {
    return Refuse(source, absl::InvalidArgumentError(absl::StrCat(
                              "has ", lists->size(), " rows (one per rank) but the job has ",
                              workers, " workers (pipeline.workers / --workers)")));
  }
  absl::StatusOr<scheduler::Schedule> schedule = scheduler::ScheduleFromActions(*lists);
  if (!schedule.ok()) return Refuse(source, schedule.status());
  if (schedule->num_microbatches != config.train.microbatches) {
    return Refuse(source,
                  absl::InvalidArgumentError(absl::StrCat(
                      "schedules ", schedule->num_microbatches,
                      " micro-batches but train.microbatches = ", config.train.microbatches)));
  }
  if (absl::Status st = scheduler::FillPeers(*schedule, *lists); !st.ok()) {
    return Refuse(source, st);
  }
  // Compute-only and lowered lists alike; a lowered CSV must also pair every message.
  if (absl::Status st = scheduler::ValidateLists(*schedule, *lists).status(); !st.ok()) {
    return Refuse(source, st);
  }
  JobPlan plan;
  plan.schedule_csv = csv_text;
  plan.schedule = *std::move(schedule);
  plan.lowered = HasComm(*lists) ? *std::move(lists) : plan.schedule.Lower();
  if (absl::Status st = PlaceLayers(config, workers, plan); !st.ok()) return Refuse(source, st);
  plan.data_parallel = data_parallel;
  return plan;
}

}  // namespace xhc::plan
