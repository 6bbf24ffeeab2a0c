#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_SAVED_SCHEDULE_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_SAVED_SCHEDULE_H_

// The CSV schedule a job runs, kept in its run directory (RUN_DIR/schedule.csv), so that a
// resumed job runs the same schedule: `xhc launch --schedule-csv FILE` names it outside the
// config, so RUN_DIR/config.yaml alone would resume on pipeline.schedule instead, and FILE
// may since have changed or gone.

#include <string>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"
#include "runtime/plan/plan.h"

namespace xhc::controller {

// RUN_DIR/schedule.csv.
std::string SavedSchedulePath(const std::string& run_dir);

// The plan of the job in `run_dir`. A fresh job (resume = false), or a resumed one whose run
// directory holds no saved schedule (it ran a built-in type): plan::MakePlan. A resumed job
// with a saved schedule runs that CSV, whatever pipeline.schedule says; a CSV named again
// (config.pipeline.schedule_csv, from --schedule-csv or the config) must hold the same bytes,
// else kFailedPrecondition naming both files; one that can no longer be read is not needed.
absl::StatusOr<plan::JobPlan> PlanForRun(const Config& config, int workers, int data_parallel,
                                         const std::string& run_dir, bool resume);

// Saves plan.schedule_csv as SavedSchedulePath(run_dir) (atomically), or removes a saved
// schedule left by an earlier job when the plan runs a built-in type.
absl::Status SaveSchedule(const plan::JobPlan& plan, const std::string& run_dir);

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_SAVED_SCHEDULE_H_
