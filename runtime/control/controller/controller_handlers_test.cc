// The RPC handlers without gRPC: the token check, the clamp on rendezvous waits, and the
// heartbeat stream's one-rank rule (regression tests for what controller_rpc_fuzzer checks).
#include "runtime/control/controller/controller_handlers.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/control/controller/tiny_controller.h"

namespace xhc::controller {
namespace {

constexpr char kToken[] = "handlers-test-token";

std::unique_ptr<Controller> MakeController() {
  return MakeTinyController("controller_handlers_test");
}

// A stream that delivers fixed beats, then ends.
class FixedBeats final : public HeartbeatIo {
 public:
  explicit FixedBeats(std::vector<proto::Heartbeat> beats) : beats_(std::move(beats)) {}
  bool Read(proto::Heartbeat* beat) override {
    if (cancelled_ || next_ >= beats_.size()) return false;
    *beat = beats_[next_++];
    return true;
  }
  bool Write(const proto::Command&) override { return true; }
  void Cancel() override { cancelled_ = true; }
  bool IsCancelled() const override { return cancelled_; }

 private:
  std::vector<proto::Heartbeat> beats_;
  size_t next_ = 0;
  std::atomic<bool> cancelled_{false};
};

proto::Heartbeat Beat(int rank, int64_t epoch) {
  proto::Heartbeat b;
  b.set_rank(rank);
  b.set_epoch(epoch);
  return b;
}

const CallInfo kAuthentic{std::string(kToken), "ipv4:127.0.0.1:1"};

TEST(ControllerHandlers, EveryRpcNeedsTheJobToken) {
  std::unique_ptr<Controller> ctl = MakeController();
  ControllerHandlers h(ctl.get(), kToken);
  const CallInfo none{}, wrong{std::string("guess"), ""};
  proto::RegisterResponse reg;
  EXPECT_TRUE(absl::IsUnauthenticated(h.Register(none, {}, &reg)));
  EXPECT_TRUE(absl::IsUnauthenticated(h.Register(wrong, {}, &reg)));
  proto::KvSetRequest set;
  set.set_key("k");
  EXPECT_TRUE(absl::IsUnauthenticated(h.KvSet(wrong, set)));
  FixedBeats io({Beat(0, 1)});
  EXPECT_TRUE(absl::IsUnauthenticated(h.HeartbeatStream(wrong, &io)));
  EXPECT_TRUE(absl::IsUnauthenticated(h.ReportStep(none, {})));
  proto::StatusResponse status;
  EXPECT_TRUE(absl::IsUnauthenticated(h.Status(wrong, &status)));
  // Nothing the refused calls carried took effect: rank 0 is still free, "k" unset.
  ASSERT_TRUE(h.Register(kAuthentic, {}, &reg).ok());
  EXPECT_EQ(reg.rank(), 0);
  proto::KvGetRequest get;
  get.add_keys("k");
  proto::KvGetResponse values;
  EXPECT_TRUE(absl::IsDeadlineExceeded(h.KvGet(kAuthentic, get, &values)));
}

// timeout_ms near 2^63 once reached the deadline arithmetic as a double of seconds added to
// the steady clock (a conversion beyond its range); a negative one is no wait at all.
TEST(ControllerHandlers, RendezvousWaitsAreClamped) {
  std::unique_ptr<Controller> ctl = MakeController();
  ControllerHandlers h(ctl.get(), kToken);
  proto::KvSetRequest set;
  set.set_key("present");
  set.set_value("v");
  ASSERT_TRUE(h.KvSet(kAuthentic, set).ok());
  proto::KvGetRequest get;
  get.add_keys("present");
  get.set_timeout_ms(std::numeric_limits<int64_t>::max());
  proto::KvGetResponse values;
  ASSERT_TRUE(h.KvGet(kAuthentic, get, &values).ok());
  ASSERT_EQ(values.values_size(), 1);
  EXPECT_EQ(values.values(0), "v");
  get.add_keys("absent");
  get.set_timeout_ms(std::numeric_limits<int64_t>::min());
  const auto t0 = std::chrono::steady_clock::now();
  const absl::Status s = h.KvGet(kAuthentic, get, &values);
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_NE(s.message().find("absent"), std::string::npos) << s;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
}

// Requests failing authentication are charged to their host: past the burst they are
// refused RESOURCE_EXHAUSTED; the token still works from that host, and other hosts are
// not affected.
TEST(ControllerHandlers, BadTokenFloodsAreBoundedPerHost) {
  std::unique_ptr<Controller> ctl = MakeController();
  ControllerHandlers h(ctl.get(), kToken);
  const CallInfo flood{std::string("guess"), "ipv4:10.1.1.1:40000"};
  proto::StatusResponse status;
  int unauthenticated = 0, exhausted = 0;
  for (int i = 0; i < 200; ++i) {
    const absl::Status s = h.Status(flood, &status);
    unauthenticated += absl::IsUnauthenticated(s);
    exhausted += absl::IsResourceExhausted(s);
    if (absl::IsResourceExhausted(s)) {
      EXPECT_NE(s.message().find("from ipv4:10.1.1.1 "), std::string::npos) << s;
    }
  }
  EXPECT_EQ(unauthenticated + exhausted, 200);
  EXPECT_GE(unauthenticated, kBadTokenBurst);
  EXPECT_LE(unauthenticated, kBadTokenBurst + 10) << "200 calls take far less than 0.5 s";
  const CallInfo same_host_with_token{std::string(kToken), "ipv4:10.1.1.1:40001"};
  EXPECT_TRUE(h.Status(same_host_with_token, &status).ok());
  const CallInfo other_host{std::string("guess"), "ipv4:10.1.1.2:40000"};
  EXPECT_TRUE(absl::IsUnauthenticated(h.Status(other_host, &status)));
}

TEST(ControllerHandlers, AStreamKeepsOnlyItsOwnRankAlive) {
  std::unique_ptr<Controller> ctl = MakeController();
  ControllerHandlers h(ctl.get(), kToken);
  proto::RegisterResponse r0, r1;
  ASSERT_TRUE(h.Register(kAuthentic, {}, &r0).ok());
  ASSERT_TRUE(h.Register(kAuthentic, {}, &r1).ok());
  ASSERT_EQ(r0.epoch(), r1.epoch()) << "epochs count per rank: the test needs them equal";
  proto::Heartbeat other = Beat(1, r1.epoch());
  other.set_progress(99);
  FixedBeats io({Beat(0, r0.epoch()), other});
  const absl::Status s = h.HeartbeatStream(kAuthentic, &io);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("sent a beat for rank 1"), std::string::npos) << s;
  JobView v = ctl->View(0, 0);
  EXPECT_EQ(v.workers[1].actions_done, 0) << "rank 0's stream moved rank 1's progress";
  EXPECT_EQ(v.workers[0].health, "dead") << "the refused stream closed";
  // The stream closed promptly (its writer is woken by the close, not by its poll).
  FixedBeats again({Beat(1, r1.epoch())});
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(h.HeartbeatStream(kAuthentic, &again).ok());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0.15);
}

}  // namespace
}  // namespace xhc::controller
