#include "runtime/control/launch/shaped_links.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/bandwidth.h"
#include "base/status_macros.h"
#include "base/subprocess.h"

namespace xhc::launch {
namespace {

// The control subnet is 169.254.J.0/24 in the launcher's namespace: link-local, never
// routed off the machine. J = 169 would shadow the cloud metadata address 169.254.169.254.
constexpr int kMetadataSubnet = 169;
// Worker i's control address is .(i + kFirstWorkerHost); .1 is the controller's.
constexpr int kFirstWorkerHost = 10;
constexpr int kMaxWorkers = 254 - kFirstWorkerHost;

// Absolute path of a system tool (a test's or a user's PATH may lack /sbin), or "".
std::string Tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    const std::string path = dir + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// Runs `argv` in the namespace `netns_fd` (-1: the launcher's); its output, or an error
// naming the command with its output.
absl::StatusOr<std::string> Run(int netns_fd, std::vector<std::string> argv) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  SpawnSpec spec;
  spec.argv = argv;
  spec.output_fd = fds[1];
  spec.netns_fd = netns_fd;
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(fds[1]);
  std::string out;
  if (pid.ok()) {
    char buf[512];
    for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  }
  close(fds[0]);
  if (!pid.ok()) return pid.status();
  const WaitResult r = WaitWithTimeout(*pid, 30);
  if (r.exit_code == 0) return out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return absl::InternalError(absl::StrCat("links: `", absl::StrJoin(argv, " "), "` failed (exit ",
                                          r.exit_code, "): ", out));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShapedLinks>> ShapedLinks::Create(int workers, int64_t bits_per_s) {
  if (workers < 1 || workers > kMaxWorkers) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline.link.bandwidth: shaped links take 1 to ", kMaxWorkers,
                     " workers, not ", workers));
  }
  if (bits_per_s <= 0) return absl::InvalidArgumentError("pipeline.link.bandwidth: no rate");
  std::unique_ptr<ShapedLinks> links(new ShapedLinks(bits_per_s));
  RETURN_IF_ERROR(links->Build(workers));
  return links;
}

absl::Status ShapedLinks::Build(int workers) {
  ip_ = Tool("ip");
  tc_ = Tool("tc");
  if (ip_.empty() || tc_.empty()) {
    return absl::FailedPreconditionError(
        "pipeline.link.bandwidth / --link-bandwidth: needs iproute2's ip and tc (setup.sh "
        "installs iproute2)");
  }
  absl::StatusOr<int> sw = NewNetworkNamespace();
  if (!sw.ok()) {
    return absl::Status(
        sw.status().code(),
        absl::StrCat("pipeline.link.bandwidth / --link-bandwidth: ", sw.status().message()));
  }
  switch_ns_ = *sw;
  for (int i = 0; i < workers; ++i) {
    ASSIGN_OR_RETURN(int fd, NewNetworkNamespace());
    worker_ns_.push_back(fd);
  }
  const std::string pid = absl::StrCat(getpid());
  // What a child `ip` opens to reach the switch namespace, from whichever namespace it runs
  // in: this process's descriptor.
  const std::string switch_path = absl::StrCat("/proc/", pid, "/fd/", switch_ns_);
  // A control subnet no address or route of this namespace already uses (another job's).
  ASSIGN_OR_RETURN(const std::string addrs, Run(-1, {ip_, "-4", "-o", "addr", "show"}));
  ASSIGN_OR_RETURN(const std::string routes, Run(-1, {ip_, "-4", "route", "show", "table", "all"}));
  for (int k = 0; k < 254 && subnet_ == 0; ++k) {
    const int j = (getpid() + k) % 254 + 1;
    const std::string prefix = absl::StrCat("169.254.", j, ".");
    if (j == kMetadataSubnet || addrs.find(prefix) != std::string::npos ||
        routes.find(prefix) != std::string::npos) {
      continue;
    }
    subnet_ = j;
  }
  if (subnet_ == 0) return absl::ResourceExhaustedError("links: every 169.254.J.0/24 is in use");
  controller_address_ = absl::StrCat("169.254.", subnet_, ".1");
  host_if_ = absl::StrCat("xhc", pid, "c");
  auto in = [&](int ns, std::vector<std::string> argv) {
    return Run(ns, std::move(argv)).status();
  };
  // The switch: two bridges, and the launcher's end of the control segment.
  RETURN_IF_ERROR(in(switch_ns_, {ip_, "link", "add", "xd", "type", "bridge"}));
  RETURN_IF_ERROR(in(switch_ns_, {ip_, "link", "add", "xc", "type", "bridge"}));
  RETURN_IF_ERROR(in(switch_ns_, {ip_, "link", "set", "dev", "xd", "up"}));
  RETURN_IF_ERROR(in(switch_ns_, {ip_, "link", "set", "dev", "xc", "up"}));
  RETURN_IF_ERROR(in(-1, {ip_, "link", "add", host_if_, "type", "veth", "peer", "name", "ctlup",
                          "netns", switch_path}));
  host_if_made_ = true;
  RETURN_IF_ERROR(
      in(-1, {ip_, "addr", "add", absl::StrCat(controller_address_, "/24"), "dev", host_if_}));
  RETURN_IF_ERROR(in(-1, {ip_, "link", "set", "dev", host_if_, "up"}));
  RETURN_IF_ERROR(in(switch_ns_, {ip_, "link", "set", "dev", "ctlup", "master", "xc", "up"}));
  // A burst of 1 ms at the rate, at least 64 KiB (one veth GSO packet): small enough that a
  // multi-MiB state transfer runs at the rate, large enough for the kernel's timer.
  const int64_t burst = std::max<int64_t>(64 * 1024, bits_per_s_ / 8 / 1000);
  for (int i = 0; i < workers; ++i) {
    const int ns = worker_ns_[i];
    const std::string d = absl::StrCat("d", i), c = absl::StrCat("c", i);
    RETURN_IF_ERROR(in(ns, {ip_, "link", "set", "dev", "lo", "up"}));
    RETURN_IF_ERROR(in(ns, {ip_, "link", "add", kDataInterface, "type", "veth", "peer", "name", d,
                            "netns", switch_path}));
    RETURN_IF_ERROR(in(
        ns, {ip_, "link", "add", "ctl0", "type", "veth", "peer", "name", c, "netns", switch_path}));
    RETURN_IF_ERROR(
        in(ns, {ip_, "addr", "add", absl::StrCat(data_address(i), "/24"), "dev", kDataInterface}));
    RETURN_IF_ERROR(in(
        ns, {ip_, "addr", "add",
             absl::StrCat("169.254.", subnet_, ".", i + kFirstWorkerHost, "/24"), "dev", "ctl0"}));
    RETURN_IF_ERROR(in(ns, {ip_, "link", "set", "dev", kDataInterface, "up"}));
    RETURN_IF_ERROR(in(ns, {ip_, "link", "set", "dev", "ctl0", "up"}));
    RETURN_IF_ERROR(in(
        ns, {tc_, "qdisc", "add", "dev", kDataInterface, "root", "tbf", "rate",
             absl::StrCat(bits_per_s_, "bit"), "burst", absl::StrCat(burst), "latency", "50ms"}));
    RETURN_IF_ERROR(in(switch_ns_, {ip_, "link", "set", "dev", d, "master", "xd", "up"}));
    RETURN_IF_ERROR(in(switch_ns_, {ip_, "link", "set", "dev", c, "master", "xc", "up"}));
  }
  return absl::OkStatus();
}

ShapedLinks::~ShapedLinks() {
  // The namespaces go with their last descriptor anyway; the launcher-side interface is
  // deleted first so it is gone when this returns (a namespace's teardown is asynchronous).
  if (host_if_made_) (void)Run(-1, {ip_, "link", "del", "dev", host_if_});
  for (int fd : worker_ns_) close(fd);
  if (switch_ns_ >= 0) close(switch_ns_);
}

std::string ShapedLinks::data_address(int rank) const { return absl::StrCat("10.99.0.", rank + 1); }

std::vector<std::string> ShapedLinks::NamespaceIds() const {
  std::vector<std::string> ids = {NetworkNamespaceId(switch_ns_)};
  for (int fd : worker_ns_) ids.push_back(NetworkNamespaceId(fd));
  return ids;
}

absl::StatusOr<std::vector<InterfaceCounters>> ShapedLinks::DataCounters() const {
  std::vector<InterfaceCounters> out;
  for (int fd : worker_ns_) {
    ASSIGN_OR_RETURN(InterfaceCounters c, ReadInterfaceCounters(fd, kDataInterface));
    out.push_back(c);
  }
  return out;
}

std::string ShapedLinks::Describe() const {
  return absl::StrCat(workers(), " workers in network namespaces, data plane shaped to ",
                      FormatBandwidth(bits_per_s_),
                      " per worker (tbf; latency not emulated), control plane unshaped on ",
                      controller_address_, ", same-host copy off");
}

}  // namespace xhc::launch
