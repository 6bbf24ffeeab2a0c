#include "runtime/control/controller/saved_schedule.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/status_macros.h"
#include "runtime/checkpoint/file_io.h"
#include "runtime/common/log.h"

namespace xhc::controller {
namespace fs = std::filesystem;

std::string SavedSchedulePath(const std::string& run_dir) {
  return (fs::path(run_dir) / "schedule.csv").string();
}

absl::StatusOr<plan::JobPlan> PlanForRun(const Config& config, int workers, int data_parallel,
                                         const std::string& run_dir, bool resume) {
  const std::string saved_path = SavedSchedulePath(run_dir);
  std::error_code ec;
  if (!resume || !fs::exists(saved_path, ec)) return plan::MakePlan(config, workers, data_parallel);
  ASSIGN_OR_RETURN(std::string saved, ReadWholeFile(saved_path));
  const std::string& named = config.pipeline.schedule_csv;
  if (!named.empty()) {
    absl::StatusOr<std::string> text = ReadWholeFile(named);
    if (!text.ok()) {
      LogWarning(
          "resume: schedule CSV %s cannot be read; running the copy saved when the job "
          "started, %s",
          named, saved_path);
    } else if (*text != saved) {
      return absl::FailedPreconditionError(
          absl::StrCat("resume: the schedule CSV ", named, " (xxhash64 ", XxHash64Hex(*text),
                       ") differs from the one this job ran, saved as ", saved_path, " (xxhash64 ",
                       XxHash64Hex(saved), ") when it started; restore ", named,
                       ", or name the saved "
                       "copy instead (--schedule-csv ",
                       saved_path,
                       ") to continue on the schedule the job "
                       "ran"));
    }
  }
  LogInfo("resume: running the schedule CSV saved in %s", saved_path);
  return plan::MakePlanFromCsv(config, workers, saved, saved_path,
                               data_parallel > 0 ? data_parallel : config.pipeline.data_parallel);
}

absl::Status SaveSchedule(const plan::JobPlan& plan, const std::string& run_dir) {
  const std::string path = SavedSchedulePath(run_dir);
  if (!plan.schedule_csv.empty()) return WriteFileAtomic(path, plan.schedule_csv);
  std::error_code ec;
  fs::remove(path, ec);  // a built-in schedule: a resume must not pick up an old CSV
  if (ec) return absl::InternalError(absl::StrCat("remove ", path, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace xhc::controller
