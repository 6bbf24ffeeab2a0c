// The control plane with real processes: a controller refuses a wrong job token and a
// worker started from a different model config; a worker on a second network address (its
// own network namespace, joined by a veth pair) joins and trains.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

std::string TinyConfig(const std::string& dir, int d_model) {
  const std::string corpus = dir + "/corpus.txt";
  std::string text;
  for (int i = 0; i < 200; ++i) absl::StrAppend(&text, "controllers assign ranks ", i, ".\n");
  WriteText(corpus, text);
  const std::string path = absl::StrCat(dir, "/config_", d_model, ".yaml");
  WriteText(path, absl::StrCat(
                      "model: {d_model: ", d_model,
                      ", n_layers: 2, n_heads: 2, n_kv_heads: 1, d_ff: 32, "
                      "seq_len: 8, residual: {type: xhc, n_streams: 4, n_active: 2, n_fixed: 1}}\n"
                      "train: {steps: 3, batch_size: 1, microbatches: 2, eval_every: 0}\n"
                      "data: {train: ",
                      corpus,
                      "}\n"
                      "pipeline: {schedule: 1f1b, workers: 2}\n"
                      "checkpoint: {every: 0}\n"));
  return path;
}

struct Job {
  std::string dir, config, log, addr;
  int controller_pid = -1;
};

Job StartController(const std::string& name, const std::string& listen_host) {
  Job job;
  job.dir = FreshDir(name);
  job.config = TinyConfig(job.dir, 16);
  job.log = job.dir + "/controller.log";
  job.addr = absl::StrCat(listen_host, ":", FreePort());
  job.controller_pid = StartBackground(
      absl::StrCat(XhcBinary(), " controller --config ", job.config, " --listen ", job.addr,
                   " --out ", job.dir, "/run --token-file ", job.dir, "/token"),
      job.log);
  // Workers read the token file the controller creates: start them only once it exists.
  for (int i = 0; i < 3000 && ReadText(job.dir + "/token").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return job;
}

std::string Worker(const Job& job, const std::string& extra) {
  return absl::StrCat(XhcBinary(), " worker --controller ", job.addr, " ", extra);
}

TEST(ControlPlane, WrongTokenAndMismatchedConfigAreRefused) {
  Job job = StartController("refuse", "127.0.0.1");
  const std::string wrong = job.dir + "/wrong-token";
  WriteText(wrong, "not-the-token\n");
  const std::string wlog = job.dir + "/worker.log";
  EXPECT_NE(RunCommand(Worker(job, "--token-file " + wrong), wlog), 0);
  EXPECT_NE(ReadText(wlog).find("refused this job token"), std::string::npos) << ReadText(wlog);
  const std::string other = TinyConfig(job.dir, 24);
  const std::string mlog = job.dir + "/mismatch.log";
  EXPECT_NE(
      RunCommand(Worker(job, absl::StrCat("--token-file ", job.dir, "/token --config ", other)),
                 mlog),
      0);
  EXPECT_NE(ReadText(mlog).find("differs from the job's"), std::string::npos) << ReadText(mlog);
  // The right token and config join and the job finishes.
  const std::string good = absl::StrCat("--token-file ", job.dir, "/token --config ", job.config);
  const int w0 = StartBackground(Worker(job, good), job.dir + "/w0.log");
  const int w1 = StartBackground(Worker(job, good), job.dir + "/w1.log");
  EXPECT_EQ(WaitForExit(job.controller_pid, 120), 0) << ReadText(job.log);
  EXPECT_EQ(WaitForExit(w0, 30), 0) << ReadText(job.dir + "/w0.log");
  EXPECT_EQ(WaitForExit(w1, 30), 0) << ReadText(job.dir + "/w1.log");
  EXPECT_NE(ReadText(job.dir + "/run/metrics.jsonl").find("\"step\": 3"), std::string::npos);
}

// Creates namespace xhcns<pid> with a veth pair 10.231.<x>.1 (here) <-> .2 (there).
bool MakeNamespace(const std::string& ns, const std::string& host_ip, const std::string& ns_ip,
                   const std::string& log) {
  const std::string a = "vxa" + ns.substr(5), b = "vxb" + ns.substr(5);
  const std::string script = absl::StrCat(
      "ip netns add ", ns, " && ip link add ", a, " type veth peer name ", b, " && ip link set ", b,
      " netns ", ns, " && ip addr add ", host_ip, "/24 dev ", a, " && ip link set ", a,
      " up && ip netns exec ", ns, " ip addr add ", ns_ip, "/24 dev ", b, " && ip netns exec ", ns,
      " ip link set ", b, " up && ip netns exec ", ns, " ip link set lo up");
  return RunCommand(script, log) == 0;
}

TEST(ControlPlane, WorkerOnSecondAddressJoinsAndTrains) {
  const std::string ns = absl::StrCat("xhcns", getpid() % 100000);
  const std::string x = absl::StrCat(getpid() % 200 + 20);
  const std::string host_ip = absl::StrCat("10.231.", x, ".1"),
                    ns_ip = absl::StrCat("10.231.", x, ".2");
  const std::string dir = FreshDir("netns");
  if (!MakeNamespace(ns, host_ip, ns_ip, dir + "/netns.log")) {
    RunCommand("ip netns del " + ns, dir + "/netns.log");
    XHC_SKIP_OR_FAIL("cannot create a network namespace here (needs root and iproute2): "
                     << ReadText(dir + "/netns.log"));
  }
  Job job = StartController("netns_job", host_ip);
  const std::string tok = absl::StrCat("--token-file ", job.dir, "/token");
  const int w0 =
      StartBackground(Worker(job, tok + " --advertise-address " + host_ip), job.dir + "/w0.log");
  const int w1 = StartBackground(
      absl::StrCat("ip netns exec ", ns, " ", Worker(job, tok + " --advertise-address " + ns_ip)),
      job.dir + "/w1.log");
  const int rc = WaitForExit(job.controller_pid, 120);
  WaitForExit(w0, 30);
  WaitForExit(w1, 30);
  RunCommand(absl::StrCat("ip netns del ", ns, "; ip link del vxa", ns.substr(5)),
             dir + "/netns.log");
  EXPECT_EQ(rc, 0) << ReadText(job.log) << ReadText(job.dir + "/w1.log");
  EXPECT_NE(ReadText(job.log).find(absl::StrCat("(pid")), std::string::npos);
  EXPECT_NE(ReadText(job.log).find(ns_ip), std::string::npos)
      << "no worker registered from " << ns_ip;
  EXPECT_NE(ReadText(job.dir + "/run/metrics.jsonl").find("\"step\": 3"), std::string::npos);
}

}  // namespace
}  // namespace xhc::testing
