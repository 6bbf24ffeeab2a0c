#ifndef XHC_RUNTIME_CONTROL_LAUNCH_SHAPED_LINKS_H_
#define XHC_RUNTIME_CONTROL_LAUNCH_SHAPED_LINKS_H_

// The network of a shaped `xhc launch` (pipeline.link.bandwidth, --link-bandwidth): one
// network namespace per worker, joined to a "switch" namespace by two veth pairs each.
//
//   worker i's namespace                 switch namespace             launcher's namespace
//   data0 10.99.0.(i+1)/24, tbf egress --- d<i> ] bridge xd
//   ctl0  169.254.J.(i+10)/24 ------------ c<i> ] bridge xc ] up ------- xhc<pid>c 169.254.J.1/24
//
// The data plane (gloo, bound to data0's address) is shaped by a token-bucket filter on
// each worker's egress, so every worker's "NIC" is the bottleneck, as on a cluster. The
// control plane (gRPC to the controller on 169.254.J.1: heartbeats, commands, the
// rendezvous store) crosses a second, unshaped pair, so it never queues behind a state
// transfer. Latency is not emulated (netem is not available on the machines this was built
// on): docs/design/shaped-links.md.
//
// Every namespace is held by a descriptor of this object only (base/netns.h): when it is
// destroyed, or the launcher dies however it dies, the namespaces go, and with them every
// veth, both bridges and the launcher-side interface. Nothing is left to clean up and names
// cannot collide with a killed launcher's.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/netns.h"

namespace xhc::launch {

class ShapedLinks {
 public:
  // Builds the namespaces and links for `workers` workers, each worker's data egress shaped
  // to `bits_per_s`. kPermissionDenied (saying what is needed) without CAP_NET_ADMIN,
  // kFailedPrecondition without iproute2's ip and tc; every failed command is named with
  // its output.
  static absl::StatusOr<std::unique_ptr<ShapedLinks>> Create(int workers, int64_t bits_per_s);

  ShapedLinks(const ShapedLinks&) = delete;
  ShapedLinks& operator=(const ShapedLinks&) = delete;
  ~ShapedLinks();

  int workers() const { return static_cast<int>(worker_ns_.size()); }
  int64_t bits_per_s() const { return bits_per_s_; }
  // The namespace worker `rank` runs in (SpawnSpec::netns_fd); the same one on a restart.
  int netns_fd(int rank) const { return worker_ns_[rank]; }
  // Worker `rank`'s data-plane address (its --advertise-address: gloo binds to it).
  std::string data_address(int rank) const;
  // The launcher-side control address the controller listens on, reachable from every
  // worker's namespace over the unshaped pair.
  const std::string& controller_address() const { return controller_address_; }
  // The worker-side data interface (shaped), in every worker's namespace.
  static constexpr char kDataInterface[] = "data0";
  // The launcher-side control interface ("xhc<pid>c").
  const std::string& host_interface() const { return host_if_; }
  // "net:[...]" of every namespace made (switch first), for logs and tests.
  std::vector<std::string> NamespaceIds() const;

  // Each worker's data0 counters now.
  absl::StatusOr<std::vector<InterfaceCounters>> DataCounters() const;

  // "2 workers in network namespaces, data plane shaped to 1 Gbit/s per worker (tbf), ...".
  std::string Describe() const;

 private:
  explicit ShapedLinks(int64_t bits_per_s) : bits_per_s_(bits_per_s) {}
  absl::Status Build(int workers);

  const int64_t bits_per_s_;
  std::string ip_, tc_;
  int switch_ns_ = -1;
  std::vector<int> worker_ns_;
  int subnet_ = 0;  // J of 169.254.J.0/24
  std::string host_if_, controller_address_;
  bool host_if_made_ = false;
};

}  // namespace xhc::launch

#endif  // XHC_RUNTIME_CONTROL_LAUNCH_SHAPED_LINKS_H_
