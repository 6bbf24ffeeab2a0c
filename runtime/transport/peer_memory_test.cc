// ReadPeerMemory and the rendezvous probe against a real second process (fork).

#include "runtime/transport/peer_memory.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"

namespace xhc {
namespace {

// A child process that holds `data` (a copy of the parent's, same addresses after fork) and
// a changed nonce until it is told to go (its end of the pipe closes).
class Child {
 public:
  explicit Child(uint64_t* nonce) {
    int ready[2], go[2];
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(go), 0);
    pid_ = fork();
    if (pid_ == 0) {
      *nonce ^= 0x5a5a;  // the child's nonce differs from the parent's
      char c = 1;
      close(ready[0]);
      close(go[1]);
      if (write(ready[1], &c, 1) != 1) _exit(2);
      while (read(go[0], &c, 1) > 0) {
      }
      _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char c = 0;
    EXPECT_EQ(read(ready[0], &c, 1), 1);
    close(ready[0]);
    go_ = go[1];
  }
  ~Child() { Stop(); }
  void Stop() {
    if (go_ < 0) return;
    close(go_);
    go_ = -1;
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int go_ = -1;
};

TEST(PeerMemoryTest, ReadsAnotherProcessesBufferWhole) {
  std::vector<float> data(3 << 20);  // 12 MiB: larger than one call may copy at once
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 65536);
  uint64_t nonce = RandomNonce();
  Child child(&nonce);
  std::vector<float> copy(data.size(), -1.0f);
  absl::Status status = ReadPeerMemory(child.pid(), reinterpret_cast<uint64_t>(data.data()),
                                       copy.data(), copy.size() * sizeof(float));
  if (!status.ok() && absl::StrContains(status.message(), "Operation not permitted")) {
    XHC_SKIP_OR_FAIL("process_vm_readv is not permitted here: " << status);
  }
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(copy, data);
}

TEST(PeerMemoryTest, ProbeAcceptsTheOfferingProcessOnlyWithItsOwnNonce) {
  uint64_t nonce = RandomNonce();
  Child child(&nonce);
  PeerMemoryOffer offer = MakePeerMemoryOffer(&nonce, /*enabled=*/true);
  offer.pid = static_cast<uint64_t>(child.pid());
  offer.nonce = nonce ^ 0x5a5a;  // what the child holds at that address
  uint64_t probe = 0;
  if (!ReadPeerMemory(child.pid(), offer.nonce_addr, &probe, sizeof(probe)).ok()) {
    XHC_SKIP_OR_FAIL("process_vm_readv is not permitted here");
  }
  EXPECT_TRUE(CanReadPeer(offer, true));
  EXPECT_FALSE(CanReadPeer(offer, false));  // this side switched off
  PeerMemoryOffer wrong_nonce = offer;
  wrong_nonce.nonce = nonce;  // the parent's value: not what that process holds
  EXPECT_FALSE(CanReadPeer(wrong_nonce, true));
  PeerMemoryOffer other_host = offer;
  other_host.boot_id ^= 2;
  EXPECT_FALSE(CanReadPeer(other_host, true));
  PeerMemoryOffer disabled = offer;
  disabled.enabled = 0;
  EXPECT_FALSE(CanReadPeer(disabled, true));
  PeerMemoryOffer bad_magic = offer;
  bad_magic.magic = 1;
  EXPECT_FALSE(CanReadPeer(bad_magic, true));
}

TEST(PeerMemoryTest, AGoneProcessOrAnUnmappedRangeIsAnErrorNamingIt) {
  uint64_t nonce = RandomNonce();
  Child child(&nonce);
  const pid_t pid = child.pid();
  float x = 0;
  absl::Status unmapped = ReadPeerMemory(pid, 8, &x, sizeof(x));  // page 0 is never mapped
  EXPECT_EQ(unmapped.code(), absl::StatusCode::kUnavailable) << unmapped;
  EXPECT_TRUE(absl::StrContains(unmapped.message(), "process")) << unmapped;
  child.Stop();  // reaped: the pid names no process now
  absl::Status gone = ReadPeerMemory(pid, reinterpret_cast<uint64_t>(&nonce), &x, sizeof(x));
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable) << gone;
  EXPECT_TRUE(absl::StrContains(gone.message(), "gone")) << gone;
}

}  // namespace
}  // namespace xhc
