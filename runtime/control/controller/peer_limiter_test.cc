#include "runtime/control/controller/peer_limiter.h"

#include "gtest/gtest.h"

namespace xhc::controller {
namespace {

using Clock = PeerLimiter::Clock;

TEST(PeerHost, DropsThePort) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.1:5555"), "ipv4:10.0.0.1");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5555"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("ipv6:[fe80::1]"), "ipv6:[fe80::1]");
  EXPECT_EQ(PeerHost("unix:/tmp/sock"), "unix:/tmp/sock");
  EXPECT_EQ(PeerHost(""), "");
}

TEST(PeerLimiter, BurstThenRatePerPeer) {
  PeerLimiter limiter(/*rate=*/10, /*burst=*/5);
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Allow("a", t0)) << i;
  EXPECT_FALSE(limiter.Allow("a", t0));
  EXPECT_TRUE(limiter.Allow("b", t0)) << "another peer has its own bucket";
  EXPECT_FALSE(limiter.Allow("a", t0 + std::chrono::milliseconds(50)));
  EXPECT_TRUE(limiter.Allow("a", t0 + std::chrono::milliseconds(110)));  // one token back
  EXPECT_FALSE(limiter.Allow("a", t0 + std::chrono::milliseconds(120)));
  // Refills to the burst, no further.
  const Clock::time_point later = t0 + std::chrono::seconds(100);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Allow("a", later)) << i;
  EXPECT_FALSE(limiter.Allow("a", later));
}

TEST(PeerLimiter, ManyPeersShareOneBucketBeyondTheTable) {
  PeerLimiter limiter(/*rate=*/1, /*burst=*/1, /*max_peers=*/2);
  const Clock::time_point t0 = Clock::now();
  EXPECT_TRUE(limiter.Allow("a", t0));
  EXPECT_TRUE(limiter.Allow("b", t0));
  EXPECT_TRUE(limiter.Allow("c", t0));   // the overflow bucket's one token
  EXPECT_FALSE(limiter.Allow("d", t0));  // shared with c: empty
  // Idle buckets are forgotten when the table is full: "e" gets a bucket of its own.
  const Clock::time_point later = t0 + std::chrono::seconds(10);
  EXPECT_TRUE(limiter.Allow("e", later));
  EXPECT_TRUE(limiter.Allow("f", later));
}

}  // namespace
}  // namespace xhc::controller
