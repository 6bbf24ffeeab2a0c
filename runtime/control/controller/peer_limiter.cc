#include "runtime/control/controller/peer_limiter.h"

#include <algorithm>

namespace xhc::controller {

std::string PeerHost(std::string_view peer) {
  const size_t colon = peer.rfind(':');
  const size_t scheme = peer.find(':');
  if (colon == std::string_view::npos || colon == scheme) return std::string(peer);
  // ipv6 "[...]:port": the last colon must follow the closing bracket.
  const size_t bracket = peer.rfind(']');
  if (bracket != std::string_view::npos && colon < bracket) return std::string(peer);
  return std::string(peer.substr(0, colon));
}

PeerLimiter::PeerLimiter(double rate, double burst, size_t max_peers)
    : rate_(rate), burst_(burst), max_peers_(max_peers), overflow_{burst, Clock::now()} {}

void PeerLimiter::Refill(Bucket& b, Clock::time_point now) const {
  const double dt = std::chrono::duration<double>(now - b.refilled).count();
  if (dt > 0) {
    b.tokens = std::min(burst_, b.tokens + dt * rate_);
    b.refilled = now;
  }
}

bool PeerLimiter::Allow(const std::string& peer, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(peer);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_peers_) {
      for (auto b = buckets_.begin(); b != buckets_.end();) {
        Refill(b->second, now);
        b = b->second.tokens >= burst_ ? buckets_.erase(b) : std::next(b);
      }
    }
    if (buckets_.size() >= max_peers_) {
      Refill(overflow_, now);
      if (overflow_.tokens < 1) return false;
      overflow_.tokens -= 1;
      return true;
    }
    it = buckets_.emplace(peer, Bucket{burst_, now}).first;
  }
  Refill(it->second, now);
  if (it->second.tokens < 1) return false;
  it->second.tokens -= 1;
  return true;
}

}  // namespace xhc::controller
