// A peer rank in its own process, started by gloo_multiprocess_test:
//   transport_peer <store_dir> <store_prefix> <rank> <world_size> <mode>
// mode "exchange": the stamped exchange and all-reduce checks, then exit 0 (1 on failure).
// mode "hang": rendezvous, one barrier, then sleep until killed (the test kills it with -9).
// mode "leave": rendezvous, one barrier, then exit 0 at once, closing its connections.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "runtime/transport/file_kv_store.h"
#include "runtime/transport/gloo_transport.h"
#include "runtime/transport/transport_test_util.h"

namespace xhc {
namespace {

absl::Status RunPeer(const std::string& dir, const std::string& prefix, int rank, int world_size,
                     const std::string& mode) {
  FileKvStore store(dir);
  GlooTransportOptions options;
  options.rank = rank;
  options.world_size = world_size;
  options.store_prefix = prefix;
  options.connect_timeout = absl::Seconds(20);
  ASSIGN_OR_RETURN(std::unique_ptr<GlooTransport> transport,
                   GlooTransport::Create(options, &store));
  if (mode == "hang") {
    RETURN_IF_ERROR(transport->Barrier(absl::Seconds(20)));
    absl::SleepFor(absl::Seconds(60));
    return absl::DeadlineExceededError("hang peer was not killed within 60 s");
  }
  if (mode == "leave") return transport->Barrier(absl::Seconds(20));
  RETURN_IF_ERROR(RunStampedExchange(*transport, /*seed=*/11, /*num_microbatches=*/5, 1 << 18));
  RETURN_IF_ERROR(RunAllReduceChecks(*transport));
  // Leave only after the parent is done with us, so it never sees a closed connection.
  return transport->Barrier(absl::Seconds(20));
}

}  // namespace
}  // namespace xhc

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s store_dir prefix rank world_size mode\n", argv[0]);
    return 2;
  }
  absl::Status status =
      xhc::RunPeer(argv[1], argv[2], std::atoi(argv[3]), std::atoi(argv[4]), argv[5]);
  if (!status.ok()) {
    std::fprintf(stderr, "transport_peer rank %s: %s\n", argv[3], status.ToString().c_str());
    return 1;
  }
  return 0;
}
