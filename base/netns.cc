#include "base/netns.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace xhc {

absl::StatusOr<int> NewNetworkNamespace() {
  int fd = -1, err = 0;
  std::thread([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (fd < 0) err = errno;
  }).join();  // the thread, alone in the new namespace, ends; the descriptor holds it
  if (fd >= 0) return fd;
  if (err == EPERM) {
    return absl::PermissionDeniedError(
        "cannot make a network namespace (unshare(CLONE_NEWNET): EPERM): run as root or with "
        "CAP_NET_ADMIN");
  }
  return absl::InternalError(absl::StrCat("cannot make a network namespace: ", std::strerror(err)));
}

absl::Status RunInNetworkNamespace(int netns_fd, const std::function<void()>& fn) {
  int err = 0;
  std::thread([&] {
    if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) != 0) {
      err = errno;
      return;
    }
    fn();
  }).join();
  if (err != 0) return absl::InternalError(absl::StrCat("setns: ", std::strerror(err)));
  return absl::OkStatus();
}

std::string NetworkNamespaceId(int netns_fd) {
  struct stat st;
  if (fstat(netns_fd, &st) != 0) return "";
  return absl::StrCat("net:[", st.st_ino, "]");
}

absl::StatusOr<InterfaceCounters> ReadInterfaceCounters(int netns_fd, const std::string& name) {
  std::string text;
  absl::Status entered = RunInNetworkNamespace(netns_fd, [&] {
    std::ifstream in("/proc/thread-self/net/dev");
    std::stringstream buf;
    buf << in.rdbuf();
    text = buf.str();
  });
  if (!entered.ok()) return entered;
  // "  eth0: RX bytes packets errs drop fifo frame compressed multicast TX bytes ...".
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t begin = line.find_first_not_of(' ');
    if (line.substr(begin, colon - begin) != name) continue;
    std::istringstream fields(line.substr(colon + 1));
    uint64_t v[9] = {};
    for (uint64_t& x : v) fields >> x;
    if (!fields) break;
    return InterfaceCounters{v[0], v[8]};
  }
  return absl::NotFoundError(
      absl::StrCat("interface ", name, " not found in /proc/thread-self/net/dev of ",
                   netns_fd >= 0 ? NetworkNamespaceId(netns_fd) : "this namespace"));
}

}  // namespace xhc
