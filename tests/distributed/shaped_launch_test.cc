// `xhc launch` with shaped links (pipeline.link.bandwidth / --link-bandwidth): the job ends
// bit-identical to the unshaped launch (bytes on a slower wire cannot change results), no
// message took the same-host path, each worker's shaped interface carried at least its
// schedule's boundary bytes, and every namespace and interface of the job is gone after it,
// also after a Ctrl-C mid-job. Runs in its own user + network namespace
// (tests/util/own_network.h); skips, saying why, where that or iproute2 is missing.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "tests/launch/tiny_job.h"
#include "tests/util/own_network.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

std::string Tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    if (access((dir + name).c_str(), X_OK) == 0) return dir + name;
  }
  return "";
}

// Every network namespace some process is in or holds a descriptor on ("net:[...]").
std::set<std::string> HeldNetworkNamespaces() {
  std::set<std::string> out;
  auto add = [&](const std::string& path) {
    char buf[64] = {};
    if (readlink(path.c_str(), buf, sizeof(buf) - 1) > 0 && std::string(buf).rfind("net:[", 0) == 0)
      out.insert(buf);
  };
  DIR* proc = opendir("/proc");
  for (dirent* e; proc != nullptr && (e = readdir(proc)) != nullptr;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string pid = absl::StrCat("/proc/", e->d_name);
    add(pid + "/ns/net");
    DIR* fds = opendir((pid + "/fd").c_str());
    for (dirent* f; fds != nullptr && (f = readdir(fds)) != nullptr;) {
      add(absl::StrCat(pid, "/fd/", f->d_name));
    }
    if (fds != nullptr) closedir(fds);
  }
  if (proc != nullptr) closedir(proc);
  return out;
}

// Waits up to timeout_s until none of `ids` is held and `interface` is gone; what is left.
std::string LeftOver(const std::set<std::string>& ids, const std::string& interface,
                     double timeout_s) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string left;
  do {
    left.clear();
    const std::set<std::string> held = HeldNetworkNamespaces();
    for (const std::string& id : ids) {
      if (held.count(id)) absl::StrAppend(&left, id, " still held; ");
    }
    if (access(("/sys/class/net/" + interface).c_str(), F_OK) == 0) {
      absl::StrAppend(&left, interface, " still here");
    }
    if (left.empty()) return "";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
           timeout_s);
  return left;
}

TEST(ShapedLaunch, SameLossesNoSameHostCopyBoundaryBytesOnTheShapedLinksNothingLeft) {
  if (Tool("ip").empty() || Tool("tc").empty()) XHC_SKIP_OR_FAIL("needs iproute2 (setup.sh)");
  const std::string dir = FreshDir("shaped_launch");
  const std::string config = WriteTinyJob(dir, 8);
  // The reference: the same launch, unshaped, before this process leaves the machine's
  // network (it must be single-threaded for that).
  const std::string plain_log = dir + "/plain.log";
  ASSERT_EQ(
      RunCommand(absl::StrCat(XhcBinary(), " launch --config ", config, " --out ", dir, "/plain"),
                 plain_log),
      0)
      << ReadText(plain_log);
  const std::vector<std::string> plain = CommittedMicrobatchLosses(dir + "/plain");
  ASSERT_EQ(plain.size(), 8u);
  // Without CAP_NET_ADMIN the option is refused, not run unshaped (root drops it here).
  const std::string refused_log = dir + "/refused.log";
  const std::string drop = getuid() == 0 && !Tool("setpriv").empty()
                               ? Tool("setpriv") + " --bounding-set -net_admin,-sys_admin "
                               : "";
  EXPECT_NE(RunCommand(absl::StrCat(drop, XhcBinary(), " launch --config ", config, " --out ", dir,
                                    "/refused --link-bandwidth 1gbit"),
                       refused_log),
            0);
  EXPECT_NE(ReadText(refused_log).find("--link-bandwidth: cannot make a network namespace"),
            std::string::npos)
      << ReadText(refused_log);
  if (const std::string why = EnterOwnNetwork(); !why.empty()) XHC_SKIP_OR_FAIL(why);

  // Shaped by the config key.
  const std::string shaped_config = dir + "/shaped.yaml";
  WriteText(shaped_config,
            absl::StrReplaceAll(ReadText(config),
                                {{"pipeline: {schedule: 1f1b, workers: 2}",
                                  "pipeline: {schedule: 1f1b, workers: 2, link: {bandwidth: "
                                  "200mbit}}"}}));
  const std::string log = dir + "/shaped.log", run = dir + "/shaped";
  ASSERT_EQ(RunCommand(
                absl::StrCat(XhcBinary(), " launch --config ", shaped_config, " --out ", run), log),
            0)
      << ReadText(log);
  const std::string text = ReadText(log);
  EXPECT_NE(text.find("links: 2 workers in network namespaces, data plane shaped to 200 Mbit/s "
                      "per worker (tbf; latency not emulated), control plane unshaped"),
            std::string::npos)
      << text;
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(text.find(absl::StrCat("transport: rank ", r,
                                     ": 0 messages received over the same-host path")),
              std::string::npos)
        << text;
  }
  EXPECT_EQ(CommittedMicrobatchLosses(run), plain) << text;

  const std::string links = ReadText(run + "/links.json");
  const std::regex rank_re(
      R"re("rank": (\d+), "tx_bytes": (\d+), "rx_bytes": (\d+), "boundary_bytes": (\d+))re");
  int ranks = 0;
  for (auto it = std::sregex_iterator(links.begin(), links.end(), rank_re);
       it != std::sregex_iterator(); ++it, ++ranks) {
    const long long tx = std::stoll((*it)[2]), boundary = std::stoll((*it)[4]);
    EXPECT_GT(boundary, 0) << links;
    EXPECT_GE(tx, boundary) << "rank " << (*it)[1] << ": " << links;
  }
  EXPECT_EQ(ranks, 2) << links;
  std::set<std::string> ids;
  const std::regex ns_re(R"re(net:\[\d+\])re");
  for (auto it = std::sregex_iterator(links.begin(), links.end(), ns_re);
       it != std::sregex_iterator(); ++it) {
    ids.insert(it->str());
  }
  EXPECT_EQ(ids.size(), 3u) << links;  // the switch and one per worker
  std::smatch host_if;
  ASSERT_TRUE(std::regex_search(links, host_if, std::regex(R"re("host_interface": "(\w+)")re")));
  EXPECT_EQ(LeftOver(ids, host_if[1], 5), "");
  std::printf("shaped launch: %s", links.c_str());

  // Ctrl-C mid-job (SIGINT to the launcher's process group, as a terminal sends it), shaped
  // by the flag this time: the namespaces and the launcher's interface go with the job.
  const std::set<std::string> before = HeldNetworkNamespaces();
  const std::string long_config = dir + "/long.yaml";
  WriteText(long_config, absl::StrReplaceAll(ReadText(config), {{"steps: 8", "steps: 100000"}}));
  const std::string ilog = dir + "/interrupted.log";
  const int launcher = StartBackground(
      absl::StrCat(Tool("setsid"), " ", XhcBinary(), " launch --config ", long_config, " --out ",
                   dir, "/interrupted --link-bandwidth 1gbit"),
      ilog);
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(WaitForText(ilog, "step     3/", 60)) << ReadText(ilog);
  std::set<std::string> job;
  for (const std::string& id : HeldNetworkNamespaces()) {
    if (!before.count(id)) job.insert(id);
  }
  EXPECT_EQ(job.size(), 3u);
  std::smatch m;
  const std::string itext = ReadText(ilog);
  ASSERT_TRUE(std::regex_search(itext, m, std::regex(R"re(unshaped on (169\.254\.\d+)\.1)re")))
      << itext;
  ASSERT_EQ(kill(-launcher, SIGINT), 0);
  EXPECT_NE(WaitForExit(launcher, 30), 0);
  EXPECT_EQ(LeftOver(job, absl::StrCat("xhc", launcher, "c"), 10), "") << ReadText(ilog);
}

}  // namespace
}  // namespace xhc::testing
