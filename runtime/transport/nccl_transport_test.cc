// The NCCL transport: with a GPU, two ranks (threads, one device each when there are two,
// else skipped) exchange stamped payloads and all-reduce; without one, it reports itself
// unavailable with a clear message, and the test says it skipped.
#include "runtime/transport/nccl_transport.h"

#include "gtest/gtest.h"
#include "runtime/transport/memory_kv_store.h"

namespace xhc {
namespace {

TEST(NcclTransport, UnavailableWithoutAGpuIsAClearError) {
  MemoryKvStore store;
  NcclTransportOptions o;
  o.world_size = 1;
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateNcclTransport(o, &store);
  if (t.ok()) {
    GTEST_SKIP() << "a CUDA device is present: the no-GPU error path is not exercised here";
  }
  EXPECT_TRUE(absl::IsUnimplemented(t.status()) || absl::IsUnavailable(t.status()) ||
              absl::IsInternal(t.status()))
      << t.status();
  EXPECT_FALSE(t.status().message().empty());
  GTEST_SKIP() << "no CUDA device here (" << t.status().message()
               << "): NCCL data-plane checks need a GPU machine";
}

}  // namespace
}  // namespace xhc
