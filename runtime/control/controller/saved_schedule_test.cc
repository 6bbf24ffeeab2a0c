// The run directory keeps a job's CSV schedule: a resume runs it without being told again,
// refuses a named CSV whose bytes changed, and does without one that is gone.
#include "runtime/control/controller/saved_schedule.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/file_read.h"
#include "gtest/gtest.h"
#include "runtime/checkpoint/file_io.h"

namespace xhc::controller {
namespace {
namespace fs = std::filesystem;

// Rank 0 holds stages 0 and 2, rank 1 stage 1: no built-in type places them so.
constexpr char kLooped[] = "0F0,0F1,2F0,2B0,2F1,2B1,0B0,0B1\n1F0,1F1,1B0,1B1\n";
// `xhc schedule --type 1f1b --ranks 2 --microbatches 2 --format torch-csv`.
constexpr char kOneFOneB[] = "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n";

class SavedSchedule : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = (fs::path(tmp != nullptr ? tmp : "/tmp") / "saved_schedule").string();
    fs::remove_all(root_);
    fs::create_directories(root_ + "/run");
    run_ = root_ + "/run";
    csv_ = root_ + "/mine.csv";
    Write(csv_, kLooped);
    config_.model.n_layers = 4;
    config_.train.microbatches = 2;
  }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
  }
  Config Named(const std::string& csv) const {
    Config c = config_;
    c.pipeline.schedule_csv = csv;
    return c;
  }
  std::string root_, run_, csv_;
  Config
      config_;  // pipeline.schedule 1f1b, no CSV: what RUN/config.yaml holds after --schedule-csv
};

TEST_F(SavedSchedule, ResumeRunsTheSavedCsvUnasked) {
  absl::StatusOr<plan::JobPlan> fresh = PlanForRun(Named(csv_), 2, 0, run_, /*resume=*/false);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE(SaveSchedule(*fresh, run_).ok());
  EXPECT_EQ(*ReadWholeFile(SavedSchedulePath(run_)), kLooped);
  absl::StatusOr<plan::JobPlan> resumed = PlanForRun(config_, 2, 0, run_, /*resume=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->schedule_csv, kLooped);
  EXPECT_EQ(resumed->StagesOf(0), (std::vector<int>{0, 2}));
  // Without --resume the config decides (a new job in an old directory).
  absl::StatusOr<plan::JobPlan> anew = PlanForRun(config_, 2, 0, run_, /*resume=*/false);
  ASSERT_TRUE(anew.ok()) << anew.status();
  EXPECT_EQ(anew->schedule.type, "1f1b");
  // Named again with the same bytes, from anywhere: accepted.
  Write(root_ + "/copy.csv", kLooped);
  EXPECT_TRUE(PlanForRun(Named(root_ + "/copy.csv"), 2, 0, run_, true).ok());
}

TEST_F(SavedSchedule, ChangedCsvIsRefusedNamingBothFiles) {
  ASSERT_TRUE(SaveSchedule(*PlanForRun(Named(csv_), 2, 0, run_, false), run_).ok());
  Write(csv_, kOneFOneB);
  absl::StatusOr<plan::JobPlan> p = PlanForRun(Named(csv_), 2, 0, run_, true);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string text(p.status().message());
  EXPECT_NE(text.find("resume: the schedule CSV " + csv_ + " (xxhash64 "), std::string::npos)
      << text;
  EXPECT_NE(text.find("differs from the one this job ran, saved as " + SavedSchedulePath(run_)),
            std::string::npos)
      << text;
}

TEST_F(SavedSchedule, VanishedCsvIsNotNeeded) {
  ASSERT_TRUE(SaveSchedule(*PlanForRun(Named(csv_), 2, 0, run_, false), run_).ok());
  fs::remove(csv_);
  absl::StatusOr<plan::JobPlan> p = PlanForRun(Named(csv_), 2, 0, run_, true);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->StagesOf(0), (std::vector<int>{0, 2}));
}

TEST_F(SavedSchedule, BuiltInScheduleRemovesAnOldCopy) {
  ASSERT_TRUE(SaveSchedule(*PlanForRun(Named(csv_), 2, 0, run_, false), run_).ok());
  absl::StatusOr<plan::JobPlan> built_in = PlanForRun(config_, 2, 0, run_, false);
  ASSERT_TRUE(built_in.ok()) << built_in.status();
  ASSERT_TRUE(SaveSchedule(*built_in, run_).ok());
  EXPECT_FALSE(fs::exists(SavedSchedulePath(run_)));
  absl::StatusOr<plan::JobPlan> resumed = PlanForRun(config_, 2, 0, run_, true);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->schedule.type, "1f1b");
  // A saved CSV that no longer fits the job (another worker count) is refused by name.
  ASSERT_TRUE(SaveSchedule(*PlanForRun(Named(csv_), 2, 0, run_, false), run_).ok());
  absl::StatusOr<plan::JobPlan> other = PlanForRun(config_, 3, 0, run_, true);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(std::string(other.status().message())
                .find("pipeline.schedule_csv " + SavedSchedulePath(run_) + ": has 2 rows"),
            std::string::npos)
      << other.status().message();
}

}  // namespace
}  // namespace xhc::controller
