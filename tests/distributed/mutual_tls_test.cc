// Mutual TLS with real processes and certificates that openssl makes at test time (the same
// commands as docs/launching.md's example): a job CA signs the controller's certificate (SAN
// 127.0.0.1 / localhost) and a worker's; a second, unrelated CA signs an intruder's. Workers
// with the job CA's certificate join and train exactly as `xhc train` does; a worker without
// a certificate, with the intruder's, speaking plaintext, or holding a wrong job token over
// valid TLS is refused promptly with a message that says why; so is a worker that trusts
// another CA than the one that signed the controller's certificate.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/strict_skip.h"
#include "gtest/gtest.h"
#include "tests/launch/tiny_job.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

constexpr int kSteps = 3;
constexpr double kConnectTimeoutS = 5;  // a refused worker must give up within this (+ slack)

// The openssl commands of docs/launching.md: job CA, server and client certificates, and an
// unrelated CA with its own client certificate. EC P-256 keys: fast to make.
std::string PkiScript(const std::string& d) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  auto sign = [&](const std::string& name, const std::string& cn, const std::string& ca,
                  const std::string& ext) {
    return absl::StrCat("openssl req ", key, " -subj '/CN=", cn, "' -keyout ", d, "/", name,
                        ".key -out ", d, "/", name, ".csr && openssl x509 -req -in ", d, "/", name,
                        ".csr -CA ", d, "/", ca, ".pem -CAkey ", d, "/", ca,
                        ".key -CAcreateserial -days 30 ", ext, " -out ", d, "/", name, ".pem");
  };
  return absl::StrCat(
      "set -e; openssl req -x509 ", key, " -days 30 -subj '/CN=xhc job CA' -keyout ", d,
      "/ca.key -out ", d, "/ca.pem; printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > ", d,
      "/server.ext; ", sign("server", "localhost", "ca", "-extfile " + d + "/server.ext"), "; ",
      sign("client", "xhc worker", "ca", ""), "; openssl req -x509 ", key,
      " -days 30 -subj '/CN=another CA' -keyout ", d, "/other-ca.key -out ", d, "/other-ca.pem; ",
      sign("intruder", "intruder", "other-ca", ""));
}

struct Refusal {
  int rc = 0;
  double wall_s = 0;
  std::string log;
};

Refusal RunRefused(const std::string& command, const std::string& log) {
  const absl::Time start = absl::Now();
  Refusal r;
  r.rc = RunCommand(command, log);
  r.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  r.log = ReadText(log);
  return r;
}

void ExpectRefused(const Refusal& r, const std::vector<std::string>& reasons) {
  EXPECT_NE(r.rc, 0) << r.log;
  EXPECT_LT(r.wall_s, kConnectTimeoutS + 5) << r.log;
  for (const std::string& why : reasons) {
    EXPECT_NE(r.log.find(why), std::string::npos) << "no \"" << why << "\" in:\n" << r.log;
  }
}

TEST(MutualTls, SignedWorkersTrainAndEveryoneElseIsRefusedSayingWhy) {
  const std::string dir = FreshDir("mutual_tls");
  if (RunCommand("openssl version", dir + "/openssl.log") != 0) {
    XHC_SKIP_OR_FAIL(
        "openssl is not installed (setup.sh installs it): " << ReadText(dir + "/openssl.log"));
  }
  const std::string pki = dir + "/pki";
  ASSERT_EQ(RunCommand(absl::StrCat("mkdir -p ", pki, " && ", PkiScript(pki)), dir + "/pki.log"), 0)
      << ReadText(dir + "/pki.log");
  const std::string config = WriteTinyJob(dir, kSteps);
  absl::StatusOr<std::vector<std::string>> single = SingleProcessLosses(dir, config);
  ASSERT_TRUE(single.ok()) << single.status();
  const std::vector<std::string> want = *single;
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));

  const int port = FreePort();
  const std::string clog = dir + "/controller.log", token = dir + "/token";
  const int controller = StartBackground(
      absl::StrCat(XhcBinary(), " controller --config ", config, " --listen 127.0.0.1:", port,
                   " --out ", dir, "/run --token-file ", token, " --tls-cert ", pki,
                   "/server.pem --tls-key ", pki, "/server.key --tls-client-ca ", pki, "/ca.pem"),
      clog);
  ASSERT_TRUE(WaitForText(clog, "listening on port", 30)) << ReadText(clog);
  auto worker = [&](const std::string& token_file, const std::string& tls) {
    return absl::StrCat(XhcBinary(), " worker --controller 127.0.0.1:", port, " --token-file ",
                        token_file, " --connect-timeout ", kConnectTimeoutS, " ", tls);
  };
  const std::string ca = absl::StrCat("--tls-ca ", pki, "/ca.pem");
  const std::string signed_cert =
      absl::StrCat(ca, " --tls-cert ", pki, "/client.pem --tls-key ", pki, "/client.key");

  ExpectRefused(RunRefused(worker(token, ca), dir + "/no-cert.log"),
                {"TLS", "requires a client certificate", "--tls-cert"});
  ExpectRefused(
      RunRefused(worker(token, absl::StrCat(ca, " --tls-cert ", pki, "/intruder.pem --tls-key ",
                                            pki, "/intruder.key")),
                 dir + "/other-ca.log"),
      {"TLS", "refused this worker's client certificate"});
  ExpectRefused(RunRefused(worker(token, ""), dir + "/plaintext.log"), {"TLS", "--tls-ca"});
  // And the other way round: a worker that trusts another CA refuses the controller.
  ExpectRefused(
      RunRefused(worker(token, absl::StrCat("--tls-ca ", pki, "/other-ca.pem --tls-cert ", pki,
                                            "/client.pem --tls-key ", pki, "/client.key")),
                 dir + "/untrusted-controller.log"),
      {"TLS", "does not trust the controller's certificate"});
  const std::string wrong = dir + "/wrong-token";
  WriteText(wrong, "not-the-token\n");
  ExpectRefused(RunRefused(worker(wrong, signed_cert), dir + "/wrong-token.log"),
                {"refused this job token"});

  const int w0 = StartBackground(worker(token, signed_cert), dir + "/w0.log");
  const int w1 = StartBackground(worker(token, signed_cert), dir + "/w1.log");
  EXPECT_EQ(WaitForExit(controller, 120), 0) << ReadText(clog);
  EXPECT_EQ(WaitForExit(w0, 30), 0) << ReadText(dir + "/w0.log");
  EXPECT_EQ(WaitForExit(w1, 30), 0) << ReadText(dir + "/w1.log");
  const std::vector<std::string> got = MicrobatchLosses(dir + "/run");
  ASSERT_EQ(got.size(), want.size()) << ReadText(clog);
  for (int s = 0; s < kSteps; ++s) EXPECT_EQ(got[s], want[s]) << "step " << s + 1;
}

}  // namespace
}  // namespace xhc::testing
