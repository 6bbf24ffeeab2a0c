#include "tests/util/own_network.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace xhc::testing {
namespace {

bool WriteProc(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.flush();
  return static_cast<bool>(f);
}

}  // namespace

std::string EnterOwnNetwork() {
  const uid_t uid = getuid();
  const gid_t gid = getgid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
    return absl::StrCat("unshare(CLONE_NEWUSER | CLONE_NEWNET): ", std::strerror(errno),
                        " (user namespaces disabled here?)");
  }
  if (!WriteProc("/proc/self/setgroups", "deny") ||
      !WriteProc("/proc/self/uid_map", absl::StrCat("0 ", uid, " 1")) ||
      !WriteProc("/proc/self/gid_map", absl::StrCat("0 ", gid, " 1"))) {
    return "cannot write this user namespace's uid/gid maps";
  }
  return "";
}

}  // namespace xhc::testing
