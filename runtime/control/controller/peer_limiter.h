#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_PEER_LIMITER_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_PEER_LIMITER_H_

// Per-peer request-rate bounds: one token bucket per client host (`rate` requests a second,
// bursts of `burst`). The controller charges requests that fail authentication to their
// host, so a flood of bad-token requests is answered RESOURCE_EXHAUSTED after its burst,
// while workers holding the token, even on the same host, are never charged or refused.
//
// Thread safety: Allow may be called from any thread.

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace xhc::controller {

// The host part of a gRPC peer string: "ipv4:10.0.0.1:5555" -> "ipv4:10.0.0.1",
// "ipv6:[::1]:5555" -> "ipv6:[::1]"; anything else unchanged. A client opens a new port per
// connection, so the port would not identify it.
std::string PeerHost(std::string_view peer);

class PeerLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  // At most `max_peers` buckets are kept: beyond that, full (idle) buckets are forgotten,
  // and if every bucket is in use, the new peer shares one overflow bucket, so a flood from
  // many addresses cannot grow the table without bound either.
  PeerLimiter(double rate, double burst, size_t max_peers = 4096);
  // Takes one token from `peer`'s bucket; false when it is empty.
  bool Allow(const std::string& peer, Clock::time_point now = Clock::now());
  double rate() const { return rate_; }

 private:
  struct Bucket {
    double tokens;
    Clock::time_point refilled;
  };
  void Refill(Bucket& b, Clock::time_point now) const;

  const double rate_, burst_;
  const size_t max_peers_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;
  Bucket overflow_;
};

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_PEER_LIMITER_H_
