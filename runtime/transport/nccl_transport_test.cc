// The NCCL transport's refusal without a GPU. Its data plane (stamped payloads, all-reduce,
// abort) has no test here yet: that needs one GPU per rank, which no machine of ours has had.
#include "runtime/transport/nccl_transport.h"

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_status.h"
#include "runtime/transport/memory_kv_store.h"

namespace xhc {
namespace {

// Without a GPU, creating the transport is refused with a message saying why; that is what
// this machine can check. With one, the path is not this test's to exercise: it skips, and
// under XHC_STRICT_GPU=1 that skip is a failure.
TEST(NcclTransport, UnavailableWithoutAGpuIsAClearError) {
  MemoryKvStore store;
  NcclTransportOptions o;
  o.world_size = 1;
  absl::StatusOr<std::unique_ptr<Transport>> t = CreateNcclTransport(o, &store);
  if (t.ok()) {
    if (cuda::StrictGpu()) {
      FAIL() << "XHC_STRICT_GPU=1: a GPU is present and the NCCL data plane has no test yet";
    }
    GTEST_SKIP() << "a CUDA device is present: the no-GPU error path is not exercised here";
  }
  EXPECT_TRUE(absl::IsUnimplemented(t.status()) || absl::IsUnavailable(t.status()) ||
              absl::IsInternal(t.status()))
      << t.status();
  EXPECT_FALSE(t.status().message().empty());
}

}  // namespace
}  // namespace xhc
