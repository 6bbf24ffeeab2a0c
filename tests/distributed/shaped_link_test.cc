// The links of a shaped launch (runtime/control/launch/shaped_links.h) shape what they
// claim: bytes pushed from one worker's namespace to another's over the data plane take
// bytes / rate, checked as ratios against the configured rate (the achieved payload rate
// within 25% of it, and twice the rate taking half the time) rather than absolute times;
// the control plane, over its own pair, is not held to the rate. The test runs in its own
// user + network namespace (tests/util/own_network.h), so it needs no root and leaves the
// machine's network alone; it skips, saying why, where that or iproute2 is missing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/bandwidth.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "runtime/control/launch/shaped_links.h"
#include "tests/util/own_network.h"

namespace xhc::testing {
namespace {

using launch::ShapedLinks;

constexpr size_t kBytes = 12 << 20;  // 0.5 s at 200 Mbit/s: seconds for the whole test
constexpr int kPort = 5555;

sockaddr_in Address(const std::string& ip) {
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_port = htons(kPort);
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// Seconds to move kBytes from a socket made in `from_ns` to a listener made in `to_ns` on
// `to_ip` (-1: this thread's namespace), from connect to the receiver's EOF; -1 on failure.
double Transfer(int from_ns, int to_ns, const std::string& to_ip) {
  int listener = -1, sender = -1;
  const sockaddr_in to = Address(to_ip);
  EXPECT_TRUE(RunInNetworkNamespace(to_ns, [&] {
                listener = socket(AF_INET, SOCK_STREAM, 0);
                const int one = 1;
                setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
                if (bind(listener, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) != 0 ||
                    listen(listener, 1) != 0) {
                  close(listener);
                  listener = -1;
                }
              }).ok());
  EXPECT_TRUE(
      RunInNetworkNamespace(from_ns, [&] { sender = socket(AF_INET, SOCK_STREAM, 0); }).ok());
  if (listener < 0 || sender < 0) return -1;
  size_t received = 0;
  std::thread receiver([&] {
    const int c = accept(listener, nullptr, nullptr);
    std::vector<char> buf(1 << 20);
    for (ssize_t n; c >= 0 && (n = read(c, buf.data(), buf.size())) > 0;) received += n;
    if (c >= 0) close(c);
  });
  const auto t0 = std::chrono::steady_clock::now();
  bool sent = connect(sender, reinterpret_cast<const sockaddr*>(&to), sizeof(to)) == 0;
  const std::vector<char> payload(1 << 20, 'x');
  for (size_t left = kBytes; sent && left > 0;) {
    const ssize_t n = write(sender, payload.data(), std::min(left, payload.size()));
    sent = n > 0;
    if (sent) left -= n;
  }
  shutdown(sender, SHUT_WR);
  receiver.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  close(sender);
  close(listener);
  EXPECT_TRUE(sent);
  EXPECT_EQ(received, kBytes);
  return sent && received == kBytes ? s : -1;
}

struct Measured {
  double data_s = -1, control_s = -1;
  uint64_t tx_bytes = 0;
};

Measured Measure(int64_t bits_per_s) {
  Measured m;
  absl::StatusOr<std::unique_ptr<ShapedLinks>> links = ShapedLinks::Create(2, bits_per_s);
  EXPECT_TRUE(links.ok()) << links.status();
  if (!links.ok()) return m;
  m.data_s = Transfer((*links)->netns_fd(0), (*links)->netns_fd(1), (*links)->data_address(1));
  m.control_s = Transfer((*links)->netns_fd(0), -1, (*links)->controller_address());
  absl::StatusOr<std::vector<InterfaceCounters>> counters = (*links)->DataCounters();
  EXPECT_TRUE(counters.ok()) << counters.status();
  if (counters.ok()) m.tx_bytes = (*counters)[0].tx_bytes;
  return m;
}

TEST(ShapedLink, DataPlaneRunsAtTheConfiguredRateAndTheControlPlaneDoesNot) {
  for (const char* tool : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(tool, X_OK) == 0) break;
    if (std::string(tool) == "/bin/ip") XHC_SKIP_OR_FAIL("needs iproute2 (setup.sh installs it)");
  }
  if (const std::string why = EnterOwnNetwork(); !why.empty()) XHC_SKIP_OR_FAIL(why);
  const int64_t slow = 200'000'000, fast = 400'000'000;
  const Measured a = Measure(slow), b = Measure(fast);
  ASSERT_GT(a.data_s, 0);
  ASSERT_GT(b.data_s, 0);
  const double rate_a = kBytes * 8 / a.data_s, rate_b = kBytes * 8 / b.data_s;
  std::printf(
      "shaped link: %zu MiB at %s in %.3f s (payload %.0f Mbit/s, %.2f of the rate); at %s in "
      "%.3f s (%.0f Mbit/s, %.2f); time ratio %.2f (2 expected); control plane %.3f / %.3f s "
      "(%.0f / %.0f Mbit/s); data0 sent %llu bytes at the slow rate\n",
      kBytes >> 20, FormatBandwidth(slow).c_str(), a.data_s, rate_a / 1e6, rate_a / slow,
      FormatBandwidth(fast).c_str(), b.data_s, rate_b / 1e6, rate_b / fast, a.data_s / b.data_s,
      a.control_s, b.control_s, kBytes * 8 / a.control_s / 1e6, kBytes * 8 / b.control_s / 1e6,
      static_cast<unsigned long long>(a.tx_bytes));
  // The payload rate: below the rate by the TCP/IP and Ethernet headers (~5%), never above.
  EXPECT_GT(rate_a, 0.75 * slow);
  EXPECT_LT(rate_a, 1.05 * slow);
  EXPECT_GT(rate_b, 0.75 * fast);
  EXPECT_LT(rate_b, 1.05 * fast);
  EXPECT_GT(a.data_s / b.data_s, 1.6);
  EXPECT_LT(a.data_s / b.data_s, 2.4);
  // Every byte left through the shaped interface (headers included).
  EXPECT_GE(a.tx_bytes, kBytes);
  // The control pair is not shaped: the same bytes at well over the data plane's rate (a
  // loaded 2-core machine still copies several Gbit/s over veths).
  ASSERT_GT(a.control_s, 0);
  EXPECT_LT(a.control_s, a.data_s / 2);
}

}  // namespace
}  // namespace xhc::testing
