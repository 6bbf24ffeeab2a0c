// Built when the CUDA toolkit is absent: NCCL transport is unavailable, said plainly.
#include "runtime/transport/nccl_transport.h"

namespace xhc {

absl::StatusOr<std::unique_ptr<Transport>> CreateNcclTransport(const NcclTransportOptions&,
                                                               KvStore*) {
  return absl::UnimplementedError(
      "NCCL transport: this build has no CUDA toolkit (rebuild where nvcc and nccl.h exist)");
}

}  // namespace xhc
