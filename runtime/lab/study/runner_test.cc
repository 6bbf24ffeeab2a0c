// RunChild (and RunChildren, for each of its children) passes the signals that end a study
// (SIGTERM, SIGINT from a Ctrl-C, SIGHUP) on to its child's process group: the child leads its
// own group, so without that the child's job, and every process it started, would run on
// after the study ended.
#include "runtime/lab/study/runner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace xhc::study {
namespace {

using Clock = std::chrono::steady_clock;

std::string TempPath(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp ? tmp : "/tmp", "/", name);
}

// Whether any process of `group` still exists, reaping the orphans this process adopted.
bool GroupAlive(pid_t group) {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  return kill(-group, 0) == 0 || errno != ESRCH;
}

// The parent's wait status once it has ended, or -1 if it is still running after 20 s.
int ParentStatusWithin20s(pid_t parent) {
  int status = 0;
  pid_t done = 0;
  for (const auto t0 = Clock::now(); done == 0 && Clock::now() - t0 < std::chrono::seconds(20);) {
    done = waitpid(parent, &status, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done == parent ? status : -1;
}

// Whether `group` is gone within 5 s; a group that is not is killed (the test failed).
bool GroupEndsWithin5s(pid_t group) {
  for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(5);) {
    if (!GroupAlive(group)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(-group, SIGKILL);
  return false;
}

class RunChildSignals : public ::testing::TestWithParam<int> {};

TEST_P(RunChildSignals, AnEndingSignalToTheParentEndsTheChildsWholeGroupFirst) {
  const int sig = GetParam();
  // Orphans (the child's own child, once the child is gone) are re-parented to this process,
  // which reaps them: a zombie would still count as alive.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string ready = TempPath("runner_ready"), log = TempPath("runner.log");
  std::remove(ready.c_str());
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    signal(sig, SIG_DFL);  // as in a study started from a shell, whatever the test runner set
    // The study's side: a child whose own child (a "worker") outlives it unless signalled.
    // A non-interactive shell starts its background jobs with SIGINT ignored, so for SIGINT
    // the child is the sleep itself (a real job's workers are started by Spawn, which does
    // not ignore it).
    const std::string publish =
        absl::StrCat("echo $$ > ", ready, ".tmp; mv ", ready, ".tmp ", ready);
    const ChildResult r =
        RunChild({"/bin/sh", "-c",
                  sig == SIGINT ? publish + "; exec sleep 60" : "sleep 60 & " + publish + "; wait"},
                 {}, log, 120);
    _exit(r.exit_code == 0 ? 0 : 3);  // reached only if the signal did not end this process
  }
  pid_t group = 0;
  for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(20);) {
    std::ifstream in(ready);
    if (in >> group) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(group, 0) << "the child never started";
  ASSERT_TRUE(GroupAlive(group));

  ASSERT_EQ(kill(parent, sig), 0);
  const int status = ParentStatusWithin20s(parent);
  ASSERT_NE(status, -1) << "the parent did not end within 20 s of signal " << sig;
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
      << "the parent must end by the signal it got, after its child; status " << status;
  EXPECT_TRUE(GroupEndsWithin5s(group))
      << "the child's process group " << group << " outlived the parent";
}

std::string SignalName(const ::testing::TestParamInfo<int>& info) {
  return info.param == SIGTERM ? "SIGTERM" : info.param == SIGINT ? "SIGINT" : "SIGHUP";
}

INSTANTIATE_TEST_SUITE_P(Signals, RunChildSignals, ::testing::Values(SIGTERM, SIGINT, SIGHUP),
                         SignalName);

// Children of one RunChildren call run at the same time: the first waits for a file that only
// the second creates, which a one-after-the-other runner would turn into a timeout.
TEST(RunChildren, RunsTheChildrenAtOnce) {
  const std::string flag = TempPath("runner_second_started"), log = TempPath("runner_at_once.log");
  std::remove(flag.c_str());
  const std::vector<ChildResult> r = RunChildren(
      {{{"/bin/sh", "-c", absl::StrCat("while [ ! -e ", flag, " ]; do sleep 0.01; done; exit 0")},
        {},
        log},
       {{"/bin/sh", "-c", absl::StrCat("touch ", flag, "; exit 5")}, {}, log}},
      30);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_FALSE(r[0].timed_out) << "the first child never saw the second one's file";
  EXPECT_EQ(r[0].exit_code, 0);
  EXPECT_EQ(r[1].exit_code, 5);
  EXPECT_TRUE(r[0].error.empty() && r[1].error.empty());
}

TEST(RunChildren, RefusesMoreThanEightAndStartsNone) {
  const std::string flag = TempPath("runner_too_many"), log = TempPath("runner_too_many.log");
  std::remove(flag.c_str());
  const std::vector<ChildCommand> nine(
      9, ChildCommand{{"/bin/sh", "-c", absl::StrCat("touch ", flag)}, {}, log});
  const std::vector<ChildResult> r = RunChildren(nine, 10);
  ASSERT_EQ(r.size(), 9u);
  for (const ChildResult& c : r) EXPECT_NE(c.error.find("at most 8"), std::string::npos) << c.error;
  EXPECT_FALSE(std::ifstream(flag).good()) << "a child was started";
}

// A SIGTERM to the parent reaches every child's group, not only the last one started.
TEST(RunChildren, AnEndingSignalEndsEveryChildsGroup) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string log = TempPath("runner_two.log");
  std::vector<std::string> ready = {TempPath("runner_two_ready_0"), TempPath("runner_two_ready_1")};
  for (const std::string& f : ready) std::remove(f.c_str());
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    signal(SIGTERM, SIG_DFL);
    std::vector<ChildCommand> children;
    for (const std::string& f : ready) {
      children.push_back(
          {{"/bin/sh", "-c",
            absl::StrCat("sleep 60 & echo $$ > ", f, ".tmp; mv ", f, ".tmp ", f, "; wait")},
           {},
           log});
    }
    const std::vector<ChildResult> r = RunChildren(children, 120);
    _exit(3);  // reached only if the signal did not end this process
  }
  std::vector<pid_t> groups;
  for (const std::string& f : ready) {
    pid_t group = 0;
    for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(20);) {
      std::ifstream in(f);
      if (in >> group) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_GT(group, 0) << "child " << f << " never started";
    groups.push_back(group);
  }
  ASSERT_EQ(kill(parent, SIGTERM), 0);
  const int status = ParentStatusWithin20s(parent);
  ASSERT_NE(status, -1) << "the parent did not end within 20 s of SIGTERM";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
  for (const pid_t group : groups) {
    EXPECT_TRUE(GroupEndsWithin5s(group)) << "child group " << group << " outlived the parent";
  }
}

}  // namespace
}  // namespace xhc::study
