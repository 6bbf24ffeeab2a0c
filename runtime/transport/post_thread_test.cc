#include "runtime/transport/post_thread.h"

#include <atomic>
#include <mutex>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace xhc {
namespace {

TEST(PostThreadTest, RunsJobsInQueueOrderOffTheCallingThread) {
  PostThread poster;
  std::mutex mu;
  std::vector<int> order;
  std::atomic<bool> on_caller{false};
  const std::thread::id caller = std::this_thread::get_id();
  PostThread::Id last = 0;
  for (int i = 0; i < 100; ++i) {
    last = poster.Queue([&, i] {
      if (std::this_thread::get_id() == caller) on_caller = true;
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
    });
  }
  ASSERT_TRUE(poster.AwaitDone(last, absl::Now() + absl::Seconds(30)));
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_FALSE(on_caller.load());
}

TEST(PostThreadTest, AwaitDoneWaitsForTheJobAndTimesOut) {
  PostThread poster;
  absl::Notification release;
  std::atomic<bool> ran{false};
  const PostThread::Id blocker = poster.Queue([&] { release.WaitForNotification(); });
  const PostThread::Id job = poster.Queue([&] { ran = true; });
  // Behind a job that does not finish: the deadline passes, the job has not run.
  EXPECT_FALSE(poster.AwaitDone(job, absl::Now() + absl::Milliseconds(50)));
  EXPECT_FALSE(ran.load());
  release.Notify();
  EXPECT_TRUE(poster.AwaitDone(blocker, absl::Now() + absl::Seconds(30)));
  EXPECT_TRUE(poster.AwaitDone(job, absl::Now() + absl::Seconds(30)));
  EXPECT_TRUE(ran.load());
}

TEST(PostThreadTest, CancelDropsAJobThatHasNotStarted) {
  PostThread poster;
  absl::Notification release;
  std::atomic<bool> ran{false};
  const PostThread::Id blocker = poster.Queue([&] { release.WaitForNotification(); });
  const PostThread::Id job = poster.Queue([&] { ran = true; });
  EXPECT_TRUE(poster.CancelOrAwait(job));
  release.Notify();
  const PostThread::Id after = poster.Queue([] {});
  EXPECT_TRUE(poster.AwaitDone(after, absl::Now() + absl::Seconds(30)));
  EXPECT_FALSE(ran.load());
  EXPECT_FALSE(poster.CancelOrAwait(blocker));  // it ran: nothing to cancel
}

TEST(PostThreadTest, CancelWaitsForARunningJob) {
  PostThread poster;
  absl::Notification started;
  std::atomic<bool> finished{false};
  const PostThread::Id job = poster.Queue([&] {
    started.Notify();
    absl::SleepFor(absl::Milliseconds(100));
    finished = true;
  });
  started.WaitForNotification();
  EXPECT_FALSE(poster.CancelOrAwait(job));
  EXPECT_TRUE(finished.load());  // the job's owner may go now
}

TEST(PostThreadTest, InterruptWakesAwaitersNowAndLater) {
  PostThread poster;
  absl::Notification release;
  poster.Queue([&] { release.WaitForNotification(); });
  const PostThread::Id job = poster.Queue([] {});
  std::thread waiter([&] {
    const absl::Time t0 = absl::Now();
    EXPECT_FALSE(poster.AwaitDone(job, absl::Now() + absl::Seconds(60)));
    EXPECT_LT(absl::Now() - t0, absl::Seconds(30));
  });
  absl::SleepFor(absl::Milliseconds(20));
  poster.Interrupt();
  waiter.join();
  EXPECT_FALSE(poster.AwaitDone(job, absl::Now() + absl::Seconds(60)));
  release.Notify();
}

}  // namespace
}  // namespace xhc
