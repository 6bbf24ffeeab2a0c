#ifndef XHC_RUNTIME_TRANSPORT_PEER_MEMORY_H_
#define XHC_RUNTIME_TRANSPORT_PEER_MEMORY_H_

// Reading another process's memory on the same host (process_vm_readv), and the probe two
// ranks run at rendezvous to learn whether one may read the other.
//
// Why: on one host, a stage-boundary state sent over loopback TCP costs the writer 0.67-0.89 ms and
// the reader 0.39-0.51 ms of CPU per 4 MiB, against 0.32 ms for one cross-process copy
// (copy_cost_bench, AMD EPYC Zen 4, 2 cores; docs/design/same-host-path.md), and both ranks share
// those cores with their compute. The probe makes the fast path safe to offer everywhere: it is
// taken only where the reader proved, by reading a random nonce at the address the peer named, that
// the pid it was given is that peer in this pid namespace and that the kernel lets it read (ptrace
// access: same user with Yama off, or CAP_SYS_PTRACE; a container may forbid it).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace xhc {

// What a rank tells each peer at rendezvous. Plain bytes on the wire (both ends are the same
// build on the same host whenever the answer can be yes).
struct PeerMemoryOffer {
  uint64_t magic = 0;       // kPeerMemoryMagic: anything else is refused
  uint64_t boot_id = 0;     // hash of /proc/sys/kernel/random/boot_id: other hosts differ
  uint64_t pid = 0;         // getpid() of the offering rank
  uint64_t nonce_addr = 0;  // address of `nonce` in the offering process
  uint64_t nonce = 0;       // random; what the reader must find at nonce_addr
  uint64_t enabled = 0;     // 0: the offering rank has the path switched off
};

inline constexpr uint64_t kPeerMemoryMagic = 0x78686370656572ull;  // "xhcpeer"

// The offer of this process, naming `*nonce` (which must outlive every peer's probe).
PeerMemoryOffer MakePeerMemoryOffer(const uint64_t* nonce, bool enabled);

// A fresh random nonce (never 0).
uint64_t RandomNonce();

// True where this process may read the offering peer's memory: both enabled, same boot,
// and the nonce read back from the peer's address equals the one it sent.
bool CanReadPeer(const PeerMemoryOffer& offer, bool enabled);

// Copies `bytes` from `remote_addr` in process `pid` into `dst`, all of it (partial reads
// are continued). kUnavailable naming the errno where the process is gone (ESRCH), the range
// is not mapped there (EFAULT) or access is refused (EPERM).
absl::Status ReadPeerMemory(pid_t pid, uint64_t remote_addr, void* dst, size_t bytes);

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_PEER_MEMORY_H_
