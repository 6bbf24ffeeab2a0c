// ReplicaReducer over FakeTransport, each replica a thread: every replica ends with the sum
// of all replicas' gradients added in replica order, bit for bit the same on each, across
// several buckets and stages; a replica that fails makes the others' Finish fail
// (kUnavailable), not hang.
#include "runtime/worker/replica_reducer.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "base/test_seed.h"
#include "gtest/gtest.h"
#include "runtime/transport/fake_transport.h"

namespace xhc::worker {
namespace {

// Two parameters of 5 and 3 elements; grad_acc filled from (seed, replica, stage).
model::ParamSetT<float> Grads(uint64_t seed, int replica, int stage) {
  model::ParamSetT<float> ps;
  ps.Add("a", {5}, false);
  ps.Add("b", {3}, false);
  std::mt19937_64 rng(seed * 1000 + replica * 10 + stage);
  std::uniform_real_distribution<double> u(-1, 1);
  for (const auto& p : ps.all()) {
    p->grad_acc.resize(p->shape[0]);
    // Magnitudes 1e-8 .. 1e8: sums whose value depends on the order of the additions.
    for (double& g : p->grad_acc) g = u(rng) * std::pow(10.0, static_cast<int>(rng() % 17) - 8);
  }
  return ps;
}

TEST(ReplicaReducer, EveryReplicaGetsTheSumInReplicaOrder) {
  const uint64_t seed = xhc::testing::TestSeed();
  constexpr int kReplicas = 3, kStages = 2;
  auto world = FakeTransport::CreateWorld(kReplicas);
  std::vector<std::vector<model::ParamSetT<float>>> sets(kReplicas);
  for (int r = 0; r < kReplicas; ++r) {
    for (int s = 0; s < kStages; ++s) sets[r].push_back(Grads(seed, r, s));
  }
  std::vector<absl::Status> status(kReplicas);
  std::vector<std::thread> threads;
  for (int r = 0; r < kReplicas; ++r) {
    threads.emplace_back([&, r] {
      // Buckets of 3 doubles: 8 elements per stage make 3 messages per peer and stage.
      ReplicaReducer reducer(world[r].get(), {0, 1, 2}, r, absl::Seconds(10), 3);
      // Launched in different stage orders on different replicas: tags keep them apart.
      for (int i = 0; i < kStages; ++i) {
        const int s = r % 2 == 0 ? i : kStages - 1 - i;
        status[r] = reducer.Launch(s, &sets[r][s]);
        if (!status[r].ok()) return;
      }
      status[r] = reducer.Finish(nullptr);
    });
  }
  for (auto& t : threads) t.join();
  for (const absl::Status& s : status) ASSERT_TRUE(s.ok()) << s;
  for (int s = 0; s < kStages; ++s) {
    std::vector<model::ParamSetT<float>> inputs;
    for (int r = 0; r < kReplicas; ++r) inputs.push_back(Grads(seed, r, s));
    for (size_t p = 0; p < inputs[0].all().size(); ++p) {
      for (size_t i = 0; i < inputs[0].all()[p]->grad_acc.size(); ++i) {
        const double want = (inputs[0].all()[p]->grad_acc[i] + inputs[1].all()[p]->grad_acc[i]) +
                            inputs[2].all()[p]->grad_acc[i];
        for (int r = 0; r < kReplicas; ++r) {
          const double got = sets[r][s].all()[p]->grad_acc[i];
          EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0)
              << "replica " << r << " stage " << s << " param " << p << " element " << i << ": "
              << got << " vs " << want;
        }
      }
    }
  }
}

TEST(ReplicaReducer, LostReplicaIsAnErrorNotAHang) {
  auto world = FakeTransport::CreateWorld(2);
  model::ParamSetT<float> grads = Grads(1, 0, 0);
  ReplicaReducer reducer(world[0].get(), {0, 1}, 0, absl::Seconds(10));
  ASSERT_TRUE(reducer.Launch(0, &grads).ok());
  world[1]->Abort();  // replica 1 dies before sending
  const absl::Status s = reducer.Finish(nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

}  // namespace
}  // namespace xhc::worker
