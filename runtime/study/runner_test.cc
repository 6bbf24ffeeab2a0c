// RunChild passes the signals that end a study on to its child's process group: the child
// leads its own group, so without that a SIGTERM (or a Ctrl-C) to the study would leave the
// child's job, and every process it started, running on.
#include "runtime/study/runner.h"

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

TEST(RunChild, SigtermToTheParentEndsTheChildsWholeGroupFirst) {
  // Orphans (the child's own child, once the child is gone) are re-parented to this process,
  // which reaps them: a zombie would still count as alive.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string ready = TempPath("runner_ready"), log = TempPath("runner.log");
  std::remove(ready.c_str());
  const pid_t parent = fork();
  ASSERT_GE(parent, 0);
  if (parent == 0) {
    // The study's side: a child whose own child (a "worker") outlives it unless signalled.
    const ChildResult r = RunChild(
        {"/bin/sh", "-c", absl::StrCat("sleep 60 & echo $$ > ", ready, ".tmp; mv ", ready,
                                       ".tmp ", ready, "; wait")},
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

  ASSERT_EQ(kill(parent, SIGTERM), 0);
  int status = 0;
  pid_t done = 0;
  for (const auto t0 = Clock::now(); done == 0 && Clock::now() - t0 < std::chrono::seconds(20);) {
    done = waitpid(parent, &status, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(done, parent) << "the parent did not end within 20 s of SIGTERM";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)
      << "the parent must end by the signal it got, after its child; status " << status;
  bool alive = true;
  for (const auto t0 = Clock::now(); Clock::now() - t0 < std::chrono::seconds(5);) {
    if (!(alive = GroupAlive(group))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(alive) << "the child's process group " << group << " outlived the parent";
  if (alive) kill(-group, SIGKILL);
}

}  // namespace
}  // namespace xhc::study
