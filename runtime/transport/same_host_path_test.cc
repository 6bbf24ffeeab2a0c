// GlooTransport's same-host path (pull_receiver.h): taken only where the probe passed and
// only for large messages, it keeps the transport's contract (a send completes once its
// receive is posted, whoever waits; failures name the peer and tag and reach every rank).
// One process, one thread per rank: the probe reads this process's own memory, which the
// kernel always allows, so the path is on wherever it is offered.

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/transport/gloo_test_world.h"
#include "runtime/transport/pull_receiver.h"
#include "runtime/transport/transport.h"

namespace xhc {
namespace {

constexpr size_t kLarge = kPullMinBytes / sizeof(float) * 4;  // 256 KiB: the same-host path
constexpr size_t kSmall = 64;                                 // 256 bytes: TCP

std::vector<float> Stamped(size_t count, float base) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = base + static_cast<float>(i % 1000);
  return v;
}

// Rank 0 sends `count` floats to rank 1, which checks them; returns rank 1's transport's
// same-host count afterwards.
void ExchangeOnce(std::vector<std::unique_ptr<GlooTransport>>& world, size_t count, uint64_t tag) {
  const std::vector<float> sent = Stamped(count, 7.0f);
  std::vector<float> got(count, -1.0f);
  OnEveryRank(2, [&](int rank) {
    absl::StatusOr<std::unique_ptr<Request>> request =
        rank == 0 ? world[0]->Isend(1, tag, sent.data(), count)
                  : world[1]->Irecv(0, tag, got.data(), count);
    ASSERT_TRUE(request.ok()) << request.status();
    absl::Status status = (*request)->Wait(absl::Seconds(20));
    EXPECT_TRUE(status.ok()) << "rank " << rank << ": " << status;
  });
  EXPECT_EQ(got, sent);
}

TEST(SameHostPathTest, TakenForLargeMessagesWhereOfferedOnly) {
  std::vector<std::unique_ptr<GlooTransport>> world = MakeGlooWorld(2, /*same_host_copy=*/true);
  EXPECT_TRUE(world[1]->SameHostFrom(0));
  EXPECT_TRUE(world[0]->SameHostTo(1));
  EXPECT_TRUE(world[0]->SameHostFrom(1));
  ExchangeOnce(world, kSmall, MakeTag(TagKind::kForwardActivation, 0, 0));
  EXPECT_EQ(world[1]->same_host_received(), 0u);
  ExchangeOnce(world, kLarge, MakeTag(TagKind::kForwardActivation, 0, 1));
  EXPECT_EQ(world[1]->same_host_received(), 1u);
  EXPECT_EQ(world[0]->same_host_received(), 0u);
}

TEST(SameHostPathTest, OffWhenEitherSideSwitchesItOff) {
  std::vector<std::unique_ptr<GlooTransport>> world = MakeGlooWorld(2, /*same_host_copy=*/false);
  EXPECT_FALSE(world[1]->SameHostFrom(0));
  EXPECT_FALSE(world[0]->SameHostTo(1));
  ExchangeOnce(world, kLarge, MakeTag(TagKind::kForwardActivation, 0, 1));
  EXPECT_EQ(world[1]->same_host_received(), 0u);

  setenv("XHC_SAME_HOST_COPY", "0", 1);
  std::vector<std::unique_ptr<GlooTransport>> env_off = MakeGlooWorld(2, true);
  unsetenv("XHC_SAME_HOST_COPY");
  EXPECT_FALSE(env_off[1]->SameHostFrom(0));
  ExchangeOnce(env_off, kLarge, MakeTag(TagKind::kForwardActivation, 0, 1));
  EXPECT_EQ(env_off[1]->same_host_received(), 0u);
}

TEST(SameHostPathTest, SendCompletesBeforeTheReceiverWaits) {
  std::vector<std::unique_ptr<GlooTransport>> world = MakeGlooWorld(2, true);
  const uint64_t tag = MakeTag(TagKind::kBackwardGradient, 1, 3);
  const std::vector<float> sent = Stamped(kLarge, 1.0f);
  std::vector<float> got(kLarge, 0.0f);
  absl::StatusOr<std::unique_ptr<Request>> recv = world[1]->Irecv(0, tag, got.data(), kLarge);
  ASSERT_TRUE(recv.ok()) << recv.status();
  EXPECT_EQ((*recv)->PostCopyTime(), absl::ZeroDuration()) << "nothing had arrived to copy";
  absl::StatusOr<std::unique_ptr<Request>> send = world[0]->Isend(1, tag, sent.data(), kLarge);
  ASSERT_TRUE(send.ok()) << send.status();
  // Nobody waits on the receive: the receiver's thread copies and answers on its own.
  absl::Status sent_status = (*send)->Wait(absl::Seconds(20));
  ASSERT_TRUE(sent_status.ok()) << sent_status;
  EXPECT_EQ(got, sent);  // the copy is complete before the sender's request is
  EXPECT_TRUE((*recv)->Wait(absl::Seconds(1)).ok());
}

TEST(SameHostPathTest, DescriptorBeforeTheReceiveIsHeldAndMatchedInOrder) {
  std::vector<std::unique_ptr<GlooTransport>> world = MakeGlooWorld(2, true);
  const uint64_t tag_a = MakeTag(TagKind::kForwardActivation, 2, 0);
  const uint64_t tag_b = MakeTag(TagKind::kForwardActivation, 2, 1);
  const std::vector<float> a1 = Stamped(kLarge, 100.0f), a2 = Stamped(kLarge, 200.0f);
  const std::vector<float> b = Stamped(kLarge, 300.0f);
  std::vector<std::unique_ptr<Request>> sends;
  for (const std::vector<float>* v : {&a1, &b, &a2}) {
    absl::StatusOr<std::unique_ptr<Request>> send =
        world[0]->Isend(1, v == &b ? tag_b : tag_a, v->data(), kLarge);
    ASSERT_TRUE(send.ok()) << send.status();
    sends.push_back(std::move(*send));
  }
  absl::SleepFor(absl::Milliseconds(100));  // the descriptors arrive with nothing posted
  std::vector<float> got_b(kLarge), got_a1(kLarge), got_a2(kLarge);
  for (auto [dst, tag] : {std::pair{&got_b, tag_b}, {&got_a1, tag_a}, {&got_a2, tag_a}}) {
    absl::StatusOr<std::unique_ptr<Request>> recv = world[1]->Irecv(0, tag, dst->data(), kLarge);
    ASSERT_TRUE(recv.ok()) << recv.status();
    // The payload was there: the post copied it on this thread, and says for how long.
    EXPECT_GT((*recv)->PostCopyTime(), absl::ZeroDuration());
    absl::Status status = (*recv)->Wait(absl::Seconds(20));
    ASSERT_TRUE(status.ok()) << status;
  }
  for (auto& send : sends) EXPECT_TRUE(send->Wait(absl::Seconds(20)).ok());
  EXPECT_EQ(got_a1, a1);
  EXPECT_EQ(got_a2, a2);
  EXPECT_EQ(got_b, b);
  EXPECT_EQ(world[1]->same_host_received(), 3u);
}

TEST(SameHostPathTest, SizeMismatchIsInvalidArgumentAndFailsTheTransport) {
  std::vector<std::unique_ptr<GlooTransport>> world = MakeGlooWorld(2, true);
  const uint64_t tag = MakeTag(TagKind::kForwardActivation, 0, 2);
  const std::vector<float> sent = Stamped(kLarge, 0.0f);
  std::vector<float> got(kLarge * 2);
  absl::StatusOr<std::unique_ptr<Request>> send = world[0]->Isend(1, tag, sent.data(), kLarge);
  ASSERT_TRUE(send.ok()) << send.status();
  absl::StatusOr<std::unique_ptr<Request>> recv = world[1]->Irecv(0, tag, got.data(), got.size());
  ASSERT_TRUE(recv.ok()) << recv.status();
  absl::Status status = (*recv)->Wait(absl::Seconds(20));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "recv from rank 0")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "bytes")) << status;
  // The receiver failed its transport, which closed the pair: the sender learns it.
  EXPECT_FALSE((*send)->Wait(absl::Seconds(20)).ok());
  EXPECT_FALSE(world[1]->Irecv(0, tag, got.data(), kLarge).ok());
}

TEST(SameHostPathTest, ExpiredLargeWaitNamesPeerAndTagAndPeersSeeTheLoss) {
  std::vector<std::unique_ptr<GlooTransport>> world = MakeGlooWorld(2, true);
  const uint64_t tag = MakeTag(TagKind::kBackwardGradient, 1, 4);
  std::vector<float> got(kLarge);
  std::vector<float> other(kLarge);
  absl::StatusOr<std::unique_ptr<Request>> peer_recv =
      world[0]->Irecv(1, MakeTag(TagKind::kForwardActivation, 0, 9), other.data(), kLarge);
  ASSERT_TRUE(peer_recv.ok()) << peer_recv.status();
  absl::StatusOr<std::unique_ptr<Request>> recv = world[1]->Irecv(0, tag, got.data(), kLarge);
  ASSERT_TRUE(recv.ok()) << recv.status();
  const absl::Time start = absl::Now();
  absl::Status status = (*recv)->Wait(absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(absl::StrContains(status.message(), "recv from rank 0")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "bwd stage 1 mb 4")) << status;
  // Rank 0's receive from rank 1 ends too: rank 1's failure closed their connection.
  absl::Status peer_status = (*peer_recv)->Wait(absl::Seconds(20));
  EXPECT_FALSE(peer_status.ok());
  EXPECT_NE(peer_status.code(), absl::StatusCode::kDeadlineExceeded) << peer_status;
}

TEST(SameHostPathTest, AbortUnblocksALargeWait) {
  std::vector<std::unique_ptr<GlooTransport>> world = MakeGlooWorld(2, true);
  std::vector<float> got(kLarge);
  absl::StatusOr<std::unique_ptr<Request>> recv =
      world[1]->Irecv(0, MakeTag(TagKind::kForwardActivation, 1, 1), got.data(), kLarge);
  ASSERT_TRUE(recv.ok()) << recv.status();
  std::thread aborter([&] {
    absl::SleepFor(absl::Milliseconds(100));
    world[1]->Abort();
  });
  const absl::Time start = absl::Now();
  absl::Status status = (*recv)->Wait(absl::Seconds(60));
  aborter.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace xhc
