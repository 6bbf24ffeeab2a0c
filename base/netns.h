#ifndef XHC_BASE_NETNS_H_
#define XHC_BASE_NETNS_H_

// Network namespaces held by file descriptors only: nothing is mounted under /run/netns, so
// a namespace (and every veth with an end in it) is gone once the last descriptor and the
// last process in it are, also when the process holding it is killed. A namespace is made
// and entered from a thread of its own (the network namespace is per thread), so the rest
// of the process stays where it is.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xhc {

// A new, empty network namespace (only a down `lo`); returns a descriptor on it
// (O_CLOEXEC). kPermissionDenied, saying what is needed, without CAP_NET_ADMIN.
absl::StatusOr<int> NewNetworkNamespace();

// Runs `fn` on a thread that has entered the namespace `netns_fd`, and waits for it.
// Sockets made by `fn` stay in that namespace whichever thread uses them later.
absl::Status RunInNetworkNamespace(int netns_fd, const std::function<void()>& fn);

// "net:[4026532301]": the namespace's identity as /proc/PID/ns/net links show it.
std::string NetworkNamespaceId(int netns_fd);

struct InterfaceCounters {
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
};

// The byte counters of interface `name` in the namespace `netns_fd` (-1: this thread's), as
// /proc/thread-self/net/dev shows them there (sysfs would show the namespace that mounted
// it). kNotFound naming the interface.
absl::StatusOr<InterfaceCounters> ReadInterfaceCounters(int netns_fd, const std::string& name);

}  // namespace xhc

#endif  // XHC_BASE_NETNS_H_
