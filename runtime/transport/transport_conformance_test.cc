// One contract, two implementations: every test here runs against GlooTransport (real TCP
// over 127.0.0.1, one thread per rank; large messages on the same-host path, and again with
// that path off: "gloo_tcp") and FakeTransport.

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "runtime/transport/fake_transport.h"
#include "runtime/transport/gloo_test_world.h"
#include "runtime/transport/transport_test_util.h"

namespace xhc {
namespace {

using World = std::vector<std::unique_ptr<Transport>>;

World MakeFakeWorld(int world_size) {
  World world;
  for (auto& endpoint : FakeTransport::CreateWorld(world_size))
    world.push_back(std::move(endpoint));
  return world;
}

class TransportConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  World MakeWorld(int world_size) {
    World world;
    if (GetParam() == "fake") {
      world = MakeFakeWorld(world_size);
    } else {
      for (auto& t : MakeGlooWorld(world_size, /*same_host_copy=*/GetParam() == "gloo")) {
        world.push_back(std::move(t));
      }
    }
    for (const auto& transport : world) EXPECT_NE(transport, nullptr);
    return world;
  }
};

TEST_P(TransportConformanceTest, StampedPayloadsInShuffledOrderArriveWhereStamped) {
  World world = MakeWorld(3);
  for (uint32_t seed : {1u, 2u}) {
    OnEveryRank(3, [&](int rank) {
      EXPECT_EQ(world[rank]->rank(), rank);
      EXPECT_EQ(world[rank]->world_size(), 3);
      absl::Status status = RunStampedExchange(*world[rank], seed, /*num_microbatches=*/6,
                                               /*large_count=*/1 << 20);
      EXPECT_TRUE(status.ok()) << "rank " << rank << ": " << status;
    });
  }
}

// transport.h: messages between one pair with the same tag match in posting order. Both
// sides post while the other is posting (GlooTransport posts sends and receives from a
// thread of its own, so the order it keeps is its queue's), with payloads large enough that
// earlier ones are still moving when later ones are posted.
TEST_P(TransportConformanceTest, SameTagMessagesMatchInPostingOrder) {
  World world = MakeWorld(2);
  const uint64_t tag = MakeTag(TagKind::kForwardActivation, 1, 0);
  constexpr int kMessages = 24;
  constexpr size_t kCount = 64 << 10;  // 256 KiB each
  OnEveryRank(2, [&](int rank) {
    std::vector<std::vector<float>> buffers(kMessages, std::vector<float>(kCount, -1.0f));
    std::vector<std::unique_ptr<Request>> requests;
    for (int i = 0; i < kMessages; ++i) {
      absl::StatusOr<std::unique_ptr<Request>> r;
      if (rank == 0) {
        std::fill(buffers[i].begin(), buffers[i].end(), static_cast<float>(i));
        r = world[0]->Isend(1, tag, buffers[i].data(), kCount);
      } else {
        r = world[1]->Irecv(0, tag, buffers[i].data(), kCount);
      }
      ASSERT_TRUE(r.ok()) << r.status();
      requests.push_back(std::move(*r));
    }
    for (int i = 0; i < kMessages; ++i) {
      absl::Status status = requests[i]->Wait(absl::Seconds(20));
      ASSERT_TRUE(status.ok()) << "rank " << rank << " message " << i << ": " << status;
      if (rank == 1) {
        EXPECT_EQ(buffers[i].front(), static_cast<float>(i)) << "receive " << i;
        EXPECT_EQ(buffers[i].back(), static_cast<float>(i)) << "receive " << i;
      }
    }
  });
}

TEST_P(TransportConformanceTest, AllReduceSumAndBarrierAreExact) {
  World world = MakeWorld(3);
  OnEveryRank(3, [&](int rank) {
    absl::Status status = RunAllReduceChecks(*world[rank]);
    EXPECT_TRUE(status.ok()) << "rank " << rank << ": " << status;
  });
}

TEST_P(TransportConformanceTest, ExpiredWaitNamesPeerAndTagAndPeersSeeTheLoss) {
  World world = MakeWorld(2);
  const uint64_t tag = MakeTag(TagKind::kForwardActivation, 3, 7);
  std::vector<float> buffer(16);
  // Rank 1 waits on rank 0 under another tag; rank 0's failure must end that wait too.
  std::vector<float> other(16);
  absl::StatusOr<std::unique_ptr<Request>> peer_recv =
      world[1]->Irecv(0, MakeTag(TagKind::kBackwardGradient, 0, 1), other.data(), other.size());
  ASSERT_TRUE(peer_recv.ok()) << peer_recv.status();

  absl::StatusOr<std::unique_ptr<Request>> recv =
      world[0]->Irecv(1, tag, buffer.data(), buffer.size());
  ASSERT_TRUE(recv.ok()) << recv.status();
  const absl::Time start = absl::Now();
  absl::Status status = (*recv)->Wait(absl::Milliseconds(200));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "recv from rank 1")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "fwd stage 3 mb 7")) << status;
  EXPECT_EQ((*recv)->Wait(absl::Seconds(1)), status);  // settled: same answer, no new wait

  // First failure fails the transport.
  absl::StatusOr<std::unique_ptr<Request>> send = world[0]->Isend(1, tag, buffer.data(), 16);
  EXPECT_EQ(send.status().code(), absl::StatusCode::kDeadlineExceeded) << send.status();
  EXPECT_EQ(world[0]->Barrier(absl::Seconds(1)).code(), absl::StatusCode::kDeadlineExceeded);

  const absl::Time peer_start = absl::Now();
  absl::Status peer_status = (*peer_recv)->Wait(absl::Seconds(20));
  EXPECT_EQ(peer_status.code(), absl::StatusCode::kUnavailable) << peer_status;
  EXPECT_TRUE(absl::StrContains(peer_status.message(), "recv from rank 0")) << peer_status;
  EXPECT_LT(absl::Now() - peer_start, absl::Seconds(5));
}

TEST_P(TransportConformanceTest, AbortUnblocksWaitOnAnotherThread) {
  World world = MakeWorld(2);
  std::vector<float> buffer(1024);
  std::vector<float> peer_buffer(1024);
  absl::StatusOr<std::unique_ptr<Request>> recv =
      world[0]->Irecv(1, MakeTag(TagKind::kBackwardGradient, 1, 2), buffer.data(), 1024);
  ASSERT_TRUE(recv.ok()) << recv.status();
  absl::StatusOr<std::unique_ptr<Request>> peer_recv =
      world[1]->Irecv(0, MakeTag(TagKind::kForwardActivation, 0, 2), peer_buffer.data(), 1024);
  ASSERT_TRUE(peer_recv.ok()) << peer_recv.status();

  absl::Status waited;
  absl::Duration waited_for;
  std::thread waiter([&] {
    const absl::Time start = absl::Now();
    waited = (*recv)->Wait(absl::Seconds(30));
    waited_for = absl::Now() - start;
  });
  absl::SleepFor(absl::Milliseconds(100));  // let the waiter block inside the engine
  world[0]->Abort();
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_LT(waited_for, absl::Seconds(3));
  world[0]->Abort();  // idempotent
  EXPECT_EQ(world[0]
                ->Isend(1, MakeTag(TagKind::kForwardActivation, 0, 0), buffer.data(), 1)
                .status()
                .code(),
            absl::StatusCode::kAborted);

  absl::Status peer_status = (*peer_recv)->Wait(absl::Seconds(20));
  EXPECT_EQ(peer_status.code(), absl::StatusCode::kUnavailable) << peer_status;
}

TEST_P(TransportConformanceTest, RejectsBadArguments) {
  World world = MakeWorld(2);
  float x = 0;
  const uint64_t tag = MakeTag(TagKind::kForwardActivation, 0, 0);
  EXPECT_EQ(world[0]->Isend(0, tag, &x, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world[0]->Isend(2, tag, &x, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world[0]->Irecv(-1, tag, &x, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world[0]->Isend(1, 42, &x, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(world[0]->Isend(1, MakeTag(TagKind::kForwardActivation, -1, 0), &x, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      world[0]->AllReduceSum(static_cast<double*>(nullptr), 0, absl::InfiniteDuration()).code(),
      absl::StatusCode::kInvalidArgument);
  // Bad arguments are caller bugs, not transport failures: the world still works.
  OnEveryRank(2, [&](int rank) {
    absl::Status status = RunStampedExchange(*world[rank], 3, 2, 4096);
    EXPECT_TRUE(status.ok()) << status;
  });
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformanceTest,
                         ::testing::Values("gloo", "gloo_tcp", "fake"),
                         [](const auto& info) { return info.param; });

TEST(TagTest, RoundTripsAndNamesItself) {
  const uint64_t tag = MakeTag(TagKind::kBackwardGradient, 65535, 123456);
  ASSERT_TRUE(IsValidTag(tag));
  absl::StatusOr<TagParts> parts = DecodeTag(tag);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(parts->kind, TagKind::kBackwardGradient);
  EXPECT_EQ(parts->stage_idx, 65535);
  EXPECT_EQ(parts->microbatch_idx, 123456);
  EXPECT_EQ(TagToString(tag), "bwd stage 65535 mb 123456");
  EXPECT_EQ(TagToString(MakeTag(TagKind::kMirrorGradient, 1, 0)), "mirror-grad stage 1 mb 0");
  EXPECT_EQ(TagToString(MakeTag(TagKind::kReplicaGradient, 2, 3)), "replica-grad stage 2 mb 3");
  EXPECT_NE(MakeTag(TagKind::kForwardActivation, 1, 2), MakeTag(TagKind::kBackwardGradient, 1, 2));
  EXPECT_NE(MakeTag(TagKind::kForwardActivation, 1, 2), MakeTag(TagKind::kForwardActivation, 2, 1));
  EXPECT_FALSE(IsValidTag(MakeTag(TagKind::kForwardActivation, 65536, 0)));
  EXPECT_FALSE(IsValidTag(MakeTag(TagKind::kForwardActivation, 0, -1)));
  EXPECT_FALSE(IsValidTag(0x0400000000000000ull));  // a gloo allreduce slot
  EXPECT_EQ(DecodeTag(7).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace xhc
