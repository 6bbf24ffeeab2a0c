#include "base/subprocess.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace xhc {
namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

TEST(SubprocessTest, PassesArgvEnvironmentAndOutput) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  setenv("XHC_SUBPROCESS_INHERITED", "kept", 1);
  setenv("XHC_SUBPROCESS_REPLACED", "old", 1);
  SpawnSpec spec;
  spec.argv = {"/bin/sh", "-c",
               "echo \"$0 $XHC_SUBPROCESS_INHERITED $XHC_SUBPROCESS_REPLACED\"; exit 3", "arg0"};
  spec.env = {{"XHC_SUBPROCESS_REPLACED", "new"}};
  spec.output_fd = fds[1];
  absl::StatusOr<pid_t> pid = Spawn(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  close(fds[1]);
  EXPECT_EQ(ReadAll(fds[0]), "arg0 kept new\n");
  close(fds[0]);
  const WaitResult r = WaitWithTimeout(*pid, 10);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 3);
  // The parent's environment is untouched.
  EXPECT_STREQ(std::getenv("XHC_SUBPROCESS_REPLACED"), "old");
}

TEST(SubprocessTest, TimeoutKillsTheWholeGroup) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  SpawnSpec spec;
  // The grandchild holds the pipe open: the read below ends only if the group kill reached it.
  spec.argv = {"/bin/sh", "-c", "sleep 30 & sleep 30"};
  spec.output_fd = fds[1];
  spec.new_process_group = true;
  absl::StatusOr<pid_t> pid = Spawn(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  close(fds[1]);
  const WaitResult r = WaitWithTimeout(*pid, 0.3, /*kill_group=*/true);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + 9);
  EXPECT_LT(r.wall_s, 5);
  EXPECT_EQ(ReadAll(fds[0]), "");  // returns at EOF: every writer is gone
  close(fds[0]);
}

// Children waited for together: each one's own exit code and the time until it ended, the
// limit applied to each (a slow one is killed without holding up the others' results).
TEST(SubprocessTest, WaitAllReportsEachChildOnItsOwn) {
  std::vector<pid_t> pids;
  for (const char* script : {"exit 3", "sleep 0.6; exit 4", "exec sleep 30"}) {
    SpawnSpec spec;
    spec.argv = {"/bin/sh", "-c", script};
    spec.new_process_group = true;
    absl::StatusOr<pid_t> pid = Spawn(spec);
    ASSERT_TRUE(pid.ok()) << pid.status();
    pids.push_back(*pid);
  }
  const std::vector<WaitResult> r = WaitAllWithTimeout(pids, 2.0, /*kill_group=*/true);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].exit_code, 3);
  EXPECT_FALSE(r[0].timed_out);
  EXPECT_EQ(r[1].exit_code, 4);
  EXPECT_FALSE(r[1].timed_out);
  EXPECT_TRUE(r[2].timed_out);
  EXPECT_EQ(r[2].exit_code, 128 + 9);
  // Ended in their own time, not at the slowest one's: the fast child long before the
  // sleeper, the sleeper after its 0.6 s, the killed one after the 2 s limit.
  EXPECT_LT(r[0].wall_s, 0.5);
  EXPECT_GE(r[1].wall_s, 0.55);
  EXPECT_LT(r[1].wall_s, r[2].wall_s);
  EXPECT_GE(r[2].wall_s, 2.0);
  EXPECT_LT(r[2].wall_s, 10);
}

TEST(SubprocessTest, MissingProgramExits127) {
  SpawnSpec spec;
  spec.argv = {"/nonexistent/xhc-program"};
  spec.output_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(spec.output_fd);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(WaitWithTimeout(*pid, 10).exit_code, 127);
  EXPECT_FALSE(Spawn(SpawnSpec{}).ok());
}

}  // namespace
}  // namespace xhc
