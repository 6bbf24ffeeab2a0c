#include "runtime/transport/peer_memory.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "absl/strings/str_format.h"

namespace xhc {
namespace {

uint64_t BootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  // 0 where the file is unreadable: such a host never matches a peer (CanReadPeer).
  return id.empty() ? 0 : std::hash<std::string>{}(id) | 1;
}

}  // namespace

uint64_t RandomNonce() {
  std::random_device device;
  const uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
  return nonce == 0 ? 1 : nonce;
}

PeerMemoryOffer MakePeerMemoryOffer(const uint64_t* nonce, bool enabled) {
  PeerMemoryOffer offer;
  offer.magic = kPeerMemoryMagic;
  offer.boot_id = BootId();
  offer.pid = static_cast<uint64_t>(getpid());
  offer.nonce_addr = reinterpret_cast<uint64_t>(nonce);
  offer.nonce = *nonce;
  offer.enabled = enabled ? 1 : 0;
  return offer;
}

bool CanReadPeer(const PeerMemoryOffer& offer, bool enabled) {
  if (!enabled || offer.magic != kPeerMemoryMagic || offer.enabled != 1) return false;
  const uint64_t boot_id = BootId();
  if (boot_id == 0 || offer.boot_id != boot_id || offer.nonce == 0) return false;
  uint64_t seen = 0;
  if (!ReadPeerMemory(static_cast<pid_t>(offer.pid), offer.nonce_addr, &seen, sizeof(seen)).ok()) {
    return false;
  }
  return seen == offer.nonce;
}

absl::Status ReadPeerMemory(pid_t pid, uint64_t remote_addr, void* dst, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    struct iovec local = {static_cast<char*>(dst) + done, bytes - done};
    struct iovec remote = {reinterpret_cast<void*>(remote_addr + done), bytes - done};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      const int err = got < 0 ? errno : EIO;
      return absl::UnavailableError(absl::StrFormat(
          "reading %d bytes at 0x%x of process %d failed after %d: %s", bytes, remote_addr, pid,
          done, err == ESRCH ? "the process is gone (ESRCH)" : std::strerror(err)));
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace xhc
