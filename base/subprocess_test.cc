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
