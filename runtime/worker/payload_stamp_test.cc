#include "runtime/worker/payload_stamp.h"

#include <vector>

#include "gtest/gtest.h"

namespace xhc::worker {
namespace {

std::vector<float> Stamped(const PayloadStamp& s, size_t payload) {
  std::vector<float> buffer(payload + kStampFloats, 1.5f);
  WriteStamp(s, buffer.data(), payload);
  return buffer;
}

TEST(PayloadStamp, RoundTripsAndLeavesThePayloadAlone) {
  const PayloadStamp s{3, 7, 11, 42, 1767225600123456};
  const std::vector<float> buffer = Stamped(s, 5);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(buffer[i], 1.5f);
  absl::StatusOr<PayloadStamp> got = ReadStamp(buffer.data(), 5, {3, 7, 11, 42, 0}, "recv F8.11");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->send_unix_us, s.send_unix_us);
}

TEST(PayloadStamp, AMisroutedPayloadNamesBothSides) {
  const std::vector<float> buffer = Stamped({1, 2, 3, 4, 0}, 5);
  for (const PayloadStamp& expected : std::vector<PayloadStamp>{
           {0, 2, 3, 4, 0}, {1, 9, 3, 4, 0}, {1, 2, 8, 4, 0}, {1, 2, 3, 5, 0}}) {
    absl::StatusOr<PayloadStamp> got = ReadStamp(buffer.data(), 5, expected, "rank 0: recv F3.3");
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(got.status().message().find("rank 0: recv F3.3"), std::string::npos);
    EXPECT_NE(got.status().message().find("got that of rank 1, stage 2, micro-batch 3, step 4"),
              std::string::npos)
        << got.status();
  }
}

TEST(PayloadStamp, AnUnstampedBufferIsRefused) {
  const std::vector<float> buffer(5 + kStampFloats, 0.0f);
  absl::StatusOr<PayloadStamp> got = ReadStamp(buffer.data(), 5, {1, 2, 3, 4, 0}, "recv B1.0");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("no sender stamp"), std::string::npos) << got.status();
}

TEST(PayloadStamp, SplitWaitSeparatesThePeersComputeFromTheTransfer) {
  // Send posted 30 µs into a 100 µs wait: 30 on the peer, 70 in flight.
  WaitSplit w = SplitWait(1000, 1100, 1030);
  EXPECT_EQ(w.peer_us, 30);
  EXPECT_EQ(w.transfer_us, 70);
  // Sent before the wait began: all of it is transfer.
  w = SplitWait(1000, 1100, 900);
  EXPECT_EQ(w.peer_us, 0);
  EXPECT_EQ(w.transfer_us, 100);
  // A sender clock ahead of ours (another host): clamped, never negative.
  w = SplitWait(1000, 1100, 5000);
  EXPECT_EQ(w.peer_us, 100);
  EXPECT_EQ(w.transfer_us, 0);
}

}  // namespace
}  // namespace xhc::worker
