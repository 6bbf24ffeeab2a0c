#include "runtime/control/launch/launch_env.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

extern char** environ;

namespace xhc::launch {
namespace {

constexpr int kDefaultControllerPort = 7070;  // `xhc controller`'s default --listen port

// The value of `name`, or nullptr when it is unset or empty (an exported-but-empty variable
// is how shells clear one, so it must not shadow a lower source).
const std::string* Lookup(const EnvMap& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

absl::StatusOr<int> ParseCount(const std::string& what, const std::string& value, int min) {
  int64_t v;
  if (!absl::SimpleAtoi(value, &v) || v < min || v > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "='", value, "' is not ", min == 0 ? "a non-negative" : "a positive", " integer"));
  }
  return static_cast<int>(v);
}

absl::StatusOr<int> ParsePort(const std::string& what, const std::string& value) {
  int64_t v;
  if (!absl::SimpleAtoi(value, &v) || v < 1 || v > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, "='", value, "' is not a TCP port (1-65535)"));
  }
  return static_cast<int>(v);
}

bool HasSpace(const std::string& s) {
  for (char c : s) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) return true;
  }
  return false;
}

// "host:port" or "[v6]:port", with a valid port.
absl::Status CheckAddress(const std::string& what, const std::string& value) {
  const size_t colon = value.rfind(':');
  const std::string host = colon == std::string::npos ? "" : value.substr(0, colon);
  const bool bad_v6 = host.find(':') != std::string::npos && host.front() != '[';
  if (host.empty() || bad_v6 || HasSpace(value)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, "='", value, "' is not HOST:PORT (an IPv6 host goes in brackets: [::1]:7070)"));
  }
  return ParsePort(what, value.substr(colon + 1)).status();
}

// An IPv6 literal needs brackets before ":port" is appended.
std::string JoinHostPort(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos && host.front() != '[';
  return v6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::Status ResolveController(const LaunchFlags& flags, const EnvMap& env, WorkerLaunch* out) {
  if (!flags.controller.empty()) {
    RETURN_IF_ERROR(CheckAddress("--controller", flags.controller));
    out->controller = flags.controller;
    out->controller_from = "--controller";
    return absl::OkStatus();
  }
  if (const std::string* v = Lookup(env, "XHC_CONTROLLER")) {
    RETURN_IF_ERROR(CheckAddress("XHC_CONTROLLER", *v));
    out->controller = *v;
    out->controller_from = "XHC_CONTROLLER";
    return absl::OkStatus();
  }
  const std::string* addr = Lookup(env, "MASTER_ADDR");
  const std::string* port = Lookup(env, "MASTER_PORT");
  if (addr != nullptr || port != nullptr) {
    if (addr == nullptr || port == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(addr == nullptr ? "MASTER_PORT" : "MASTER_ADDR", " is set but ",
                       addr == nullptr ? "MASTER_ADDR" : "MASTER_PORT",
                       " is not: torchrun-style launches need both"));
    }
    if (HasSpace(*addr)) {
      return absl::InvalidArgumentError(absl::StrCat("MASTER_ADDR='", *addr, "' is not a host"));
    }
    ASSIGN_OR_RETURN(int p, ParsePort("MASTER_PORT", *port));
    out->controller = JoinHostPort(*addr, p);
    out->controller_from = "MASTER_ADDR:MASTER_PORT";
    return absl::OkStatus();
  }
  for (const char* name : {"SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
    const std::string* list = Lookup(env, name);
    if (list == nullptr) continue;
    absl::StatusOr<std::string> host = FirstSlurmHost(*list);
    if (!host.ok())
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", host.status().message()));
    int p = kDefaultControllerPort;
    std::string port_from = "default port";
    if (!flags.controller_port.empty()) {
      ASSIGN_OR_RETURN(p, ParsePort("--controller-port", flags.controller_port));
      port_from = "--controller-port";
    } else if (const std::string* v = Lookup(env, "XHC_CONTROLLER_PORT")) {
      ASSIGN_OR_RETURN(p, ParsePort("XHC_CONTROLLER_PORT", *v));
      port_from = "XHC_CONTROLLER_PORT";
    }
    out->controller = JoinHostPort(*host, p);
    out->controller_from = absl::StrCat("first host of ", name, " + ", port_from);
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      "no controller address: pass --controller HOST:PORT, or set XHC_CONTROLLER, or "
      "MASTER_ADDR + MASTER_PORT (torchrun), or run inside a Slurm allocation "
      "(SLURM_JOB_NODELIST)");
}

// The first source of `names` that is set, parsed as a count >= min.
absl::Status ResolveCount(int flag_value, const std::string& flag_name,
                          std::initializer_list<const char*> names, int min, const EnvMap& env,
                          int* value, std::string* from) {
  if (flag_value >= min) {
    *value = flag_value;
    *from = flag_name;
    return absl::OkStatus();
  }
  for (const char* name : names) {
    const std::string* v = Lookup(env, name);
    if (v == nullptr) continue;
    ASSIGN_OR_RETURN(*value, ParseCount(name, *v, min));
    *from = name;
    return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkerLaunch> ResolveWorkerLaunch(const LaunchFlags& flags, const EnvMap& env) {
  WorkerLaunch out;
  RETURN_IF_ERROR(ResolveController(flags, env, &out));
  RETURN_IF_ERROR(ResolveCount(flags.rank_hint, "--rank-hint", {"RANK", "SLURM_PROCID"}, 0, env,
                               &out.rank_hint, &out.rank_from));
  RETURN_IF_ERROR(ResolveCount(flags.world_size, "--world-size",
                               {"WORLD_SIZE", "SLURM_NTASKS", "SLURM_NPROCS"}, 1, env,
                               &out.world_size, &out.world_from));
  if (out.world_size > 0 && out.rank_hint >= out.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        out.rank_from, "=", out.rank_hint, " is not below ", out.world_from, "=", out.world_size));
  }
  return out;
}

absl::StatusOr<std::string> FirstSlurmHost(const std::string& hostlist) {
  // Hosts are separated by commas outside brackets; each bracket holds ranges "a-b" and
  // single numbers separated by commas; the first host takes every bracket's first number.
  std::string host;
  size_t i = 0;
  while (i < hostlist.size() && hostlist[i] != ',') {
    const char c = hostlist[i];
    if (c == ']' || absl::ascii_isspace(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(absl::StrCat("'", hostlist, "' is not a Slurm hostlist"));
    }
    if (c != '[') {
      host += c;
      ++i;
      continue;
    }
    const size_t close = hostlist.find(']', i);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", hostlist, "': unclosed '['"));
    }
    const std::string inner = hostlist.substr(i + 1, close - i - 1);
    const std::string first = inner.substr(0, inner.find_first_of(",-"));
    if (first.empty() || !std::all_of(first.begin(), first.end(), absl::ascii_isdigit)) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", hostlist, "': range [", inner, "] does not start with a number"));
    }
    host += first;
    i = close + 1;
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", hostlist, "' names no host"));
  }
  return host;
}

EnvMap ProcessEnv() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace xhc::launch
