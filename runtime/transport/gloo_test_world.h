#ifndef XHC_RUNTIME_TRANSPORT_GLOO_TEST_WORLD_H_
#define XHC_RUNTIME_TRANSPORT_GLOO_TEST_WORLD_H_

// Test worlds of GlooTransports in one process (one thread per rank, real TCP on 127.0.0.1)
// for the transport's tests.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/transport/gloo_transport.h"
#include "runtime/transport/memory_kv_store.h"

namespace xhc {

// Runs fn(rank) on one thread per rank and joins them.
template <typename Fn>
void OnEveryRank(int world_size, Fn fn) {
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) threads.emplace_back(fn, rank);
  for (std::thread& thread : threads) thread.join();
}

// `same_host_copy`: GlooTransportOptions::same_host_copy of every rank.
inline std::vector<std::unique_ptr<GlooTransport>> MakeGlooWorld(int world_size,
                                                                 bool same_host_copy) {
  static MemoryKvStore* store = new MemoryKvStore();  // shared; each world has its own prefix
  static std::atomic<int> num_worlds{0};
  const std::string prefix = absl::StrCat("test-world-", num_worlds.fetch_add(1), "/");
  std::vector<std::unique_ptr<GlooTransport>> world(world_size);
  // Create blocks until every rank has joined, so each rank rendezvouses on its own thread.
  OnEveryRank(world_size, [&](int rank) {
    GlooTransportOptions options;
    options.rank = rank;
    options.world_size = world_size;
    options.store_prefix = prefix;
    options.connect_timeout = absl::Seconds(20);
    options.same_host_copy = same_host_copy;
    absl::StatusOr<std::unique_ptr<GlooTransport>> transport =
        GlooTransport::Create(options, store);
    ASSERT_TRUE(transport.ok()) << transport.status();
    world[rank] = std::move(*transport);
  });
  return world;
}

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_GLOO_TEST_WORLD_H_
