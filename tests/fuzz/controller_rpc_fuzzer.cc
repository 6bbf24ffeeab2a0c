// Fuzzes every controller RPC handler (ControllerHandlers: the code the gRPC service runs,
// without the network) with sessions of decoded requests (controller_rpc.proto), from a
// client holding the job token, a wrong one or none. A fresh 2-rank controller per input.
// Besides crashes, sanitizer reports and leaks, the run aborts when a state invariant breaks,
// checked against a shadow model after every call:
//   - a call without the job token is refused (UNAUTHENTICATED, or RESOURCE_EXHAUSTED past
//     the bad-token rate) and changes nothing;
//   - every refusal carries a message;
//   - a rank is registered at most once (no Run, so no rank is ever freed), each with a new
//     epoch; a registration is refused only when both ranks are taken;
//   - a heartbeat stream attaches only for a registered rank, with its current epoch, once;
//   - a report is accepted only from a rank's current registration, and at most
//     Controller::kMaxPendingReportsPerRank are kept per rank;
//   - the rendezvous store returns exactly what was set.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/common/config.h"
#include "runtime/control/controller/controller.h"
#include "runtime/control/controller/controller_handlers.h"
#include "tests/fuzz/controller_rpc.pb.h"

namespace xhc::controller {
namespace {

constexpr char kToken[] = "fuzz-job-token";
constexpr int kWorkers = 2;
constexpr int kMaxCalls = 64;

[[noreturn]] void Violated(const std::string& what) {
  std::fprintf(stderr, "controller_rpc_fuzzer: invariant violated: %s\n", what.c_str());
  std::abort();
}

void Check(bool ok, const std::string& what) {
  if (!ok) Violated(what);
}

void CheckRefusal(const absl::Status& s, const char* rpc) {
  if (!s.ok() && s.message().empty()) Violated(absl::StrCat(rpc, ": an error without a message"));
}

const Config& TheConfig() {
  // A long heartbeat timeout: whether a rank is "hung" must not depend on the fuzzer's speed.
  static const Config* config = [] {
    absl::StatusOr<Config> c = ParseConfig(R"(
model: {vocab_size: 256, d_model: 16, n_layers: 2, n_heads: 2, n_kv_heads: 1, seq_len: 8}
train: {steps: 4, batch_size: 1, microbatches: 2, eval_every: 0}
pipeline: {schedule: 1f1b, workers: 2}
checkpoint: {every: 0}
fault: {heartbeat_timeout: 100000}
)");
    if (!c.ok()) Violated(absl::StrCat("fuzzer config: ", c.status().message()));
    return new Config(*std::move(c));
  }();
  return *config;
}

// Beats in order, then the end of the stream; commands written are kept.
class ScriptedStream final : public HeartbeatIo {
 public:
  explicit ScriptedStream(const fuzz::HeartbeatCall& call) : call_(call) {}
  bool Read(proto::Heartbeat* beat) override {
    if (cancelled_ || next_ >= call_.beats_size()) return false;
    *beat = call_.beats(next_++);
    return true;
  }
  bool Write(const proto::Command&) override { return !cancelled_; }
  void Cancel() override { cancelled_ = true; }
  bool IsCancelled() const override { return cancelled_; }

 private:
  const fuzz::HeartbeatCall& call_;
  int next_ = 0;
  std::atomic<bool> cancelled_{false};
};

// What the controller must hold, as far as the calls so far tell.
struct Shadow {
  bool registered[kWorkers] = {false, false};
  bool attached[kWorkers] = {false, false};
  int64_t epoch[kWorkers] = {0, 0};
  std::map<std::string, std::string> kv;
  std::set<std::pair<Controller::ReportKey, int>> reports;  // kept: (key, rank)
};

// Everything a call could change that View shows (not the clock-dependent ages).
std::string Digest(Controller* ctl) {
  JobView v = ctl->View(0, 0);
  std::string d = absl::StrCat(v.state, "|", v.generation, "|", v.step);
  for (const WorkerView& w : v.workers) {
    absl::StrAppend(&d, "|", w.rank, ",", w.worker_id, ",", w.host, ",", w.pid, ",", w.epoch, ",",
                    w.actions_done, ",", w.step, ",", w.health);
  }
  return d;
}

bool InRange(int rank) { return rank >= 0 && rank < kWorkers; }

void RunCall(ControllerHandlers& h, Controller* ctl, Shadow& shadow, const fuzz::RpcCall& call) {
  CallInfo info;
  if (call.token() == fuzz::RpcCall::JOB_TOKEN) info.token = kToken;
  if (call.token() == fuzz::RpcCall::WRONG_TOKEN) info.token = "not-the-token";
  const bool authentic = info.token.has_value() && *info.token == kToken;
  const std::string before = Digest(ctl);
  absl::Status s;
  switch (call.rpc_case()) {
    case fuzz::RpcCall::kRegister: {
      proto::RegisterResponse resp;
      s = h.Register(info, call.register_(), &resp);
      CheckRefusal(s, "Register");
      if (!authentic) break;
      if (s.ok()) {
        Check(InRange(resp.rank()), "Register: rank out of range");
        Check(!shadow.registered[resp.rank()], "Register: a rank was given out twice");
        Check(resp.epoch() > shadow.epoch[resp.rank()], "Register: epoch did not grow");
        Check(resp.world_size() == kWorkers, "Register: wrong world size");
        shadow.registered[resp.rank()] = true;
        shadow.epoch[resp.rank()] = resp.epoch();
      } else if (absl::IsResourceExhausted(s)) {
        Check(shadow.registered[0] && shadow.registered[1], "Register: refused with a free rank");
      }
      break;
    }
    case fuzz::RpcCall::kKvSet:
      s = h.KvSet(info, call.kv_set());
      CheckRefusal(s, "KvSet");
      if (authentic) {
        Check(s.ok(), "KvSet: refused with the job token");
        shadow.kv[call.kv_set().key()] = call.kv_set().value();
      }
      break;
    case fuzz::RpcCall::kKvGet: {
      proto::KvGetRequest req = call.kv_get();
      // A wait is only a wait: the fuzzer asks for none (the clamp of timeout_ms to
      // [0, kMaxKvWaitS] is tested in controller_handlers_test).
      req.set_timeout_ms(0);
      proto::KvGetResponse resp;
      s = h.KvGet(info, req, &resp);
      CheckRefusal(s, "KvGet");
      if (!authentic) break;
      bool all = true;
      for (const std::string& k : req.keys()) all = all && shadow.kv.count(k);
      Check(s.ok() == all, "KvGet: answered for a missing key or refused a present one");
      if (s.ok()) {
        Check(resp.values_size() == req.keys_size(), "KvGet: wrong number of values");
        for (int i = 0; i < req.keys_size(); ++i) {
          Check(resp.values(i) == shadow.kv[req.keys(i)], "KvGet: a value differs from KvSet's");
        }
      }
      break;
    }
    case fuzz::RpcCall::kHeartbeatStream: {
      const fuzz::HeartbeatCall& hc = call.heartbeat_stream();
      ScriptedStream io(hc);
      s = h.HeartbeatStream(info, &io);
      CheckRefusal(s, "HeartbeatStream");
      if (!authentic || hc.beats_size() == 0) break;
      const int rank = hc.beats(0).rank();
      const bool may = InRange(rank) && shadow.registered[rank] && !shadow.attached[rank] &&
                       hc.beats(0).epoch() == shadow.epoch[rank];
      if (may) {
        shadow.attached[rank] = true;
        Check(s.ok() || absl::IsInvalidArgument(s), "HeartbeatStream: a valid attach refused");
      } else {
        Check(!s.ok(), "HeartbeatStream: attached without the rank's current registration");
      }
      break;
    }
    case fuzz::RpcCall::kReportStep: {
      const proto::StepReport& r = call.report_step();
      s = h.ReportStep(info, r);
      CheckRefusal(s, "ReportStep");
      if (!authentic) break;
      const bool current = InRange(r.rank()) && shadow.registered[r.rank()] &&
                           r.epoch() == shadow.epoch[r.rank()] &&
                           r.kind_case() != proto::StepReport::KIND_NOT_SET;
      if (!current) {
        Check(!s.ok(), "ReportStep: accepted a report from a fenced or unknown registration");
        break;
      }
      if (r.generation() != 0) {
        Check(s.ok(), "ReportStep: a stale generation must be dropped quietly");
        break;
      }
      const std::pair<Controller::ReportKey, int> key{Controller::KeyOf(r), r.rank()};
      int pending = 0;
      for (const auto& [k, rank] : shadow.reports) pending += rank == r.rank();
      if (shadow.reports.count(key) || pending < Controller::kMaxPendingReportsPerRank) {
        Check(s.ok(), "ReportStep: a current report refused");
        shadow.reports.insert(key);
      } else {
        Check(absl::IsResourceExhausted(s), "ReportStep: more reports kept than the bound");
      }
      break;
    }
    case fuzz::RpcCall::kStatus: {
      proto::StatusResponse resp;
      s = h.Status(info, &resp);
      CheckRefusal(s, "Status");
      if (authentic) Check(s.ok() && resp.workers_size() == kWorkers, "Status: wrong answer");
      break;
    }
    case fuzz::RpcCall::RPC_NOT_SET: return;
  }
  if (!authentic) {
    // UNAUTHENTICATED, or RESOURCE_EXHAUSTED once this client's bad-token burst is spent.
    Check(absl::IsUnauthenticated(s) || absl::IsResourceExhausted(s),
          "a call without the job token was not refused");
    Check(Digest(ctl) == before, "a call without the job token changed the controller");
  }
}

}  // namespace
}  // namespace xhc::controller

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xhc::controller;
  xhc::fuzz::RpcSession session;
  if (!session.ParseFromArray(data, static_cast<int>(size))) return 0;  // gRPC refuses it too
  ControllerOptions options;
  options.workers = kWorkers;
  options.quiet = true;
  options.run_dir = "/tmp/xhc-controller-rpc-fuzzer";  // Run() is never called: nothing written
  absl::StatusOr<std::unique_ptr<Controller>> ctl = Controller::Create(TheConfig(), options);
  Check(ctl.ok(), "Controller::Create failed");
  ControllerHandlers handlers(ctl->get(), kToken, /*command_poll_s=*/0.001);
  Shadow shadow;
  for (int i = 0; i < session.calls_size() && i < kMaxCalls; ++i) {
    RunCall(handlers, ctl->get(), shadow, session.calls(i));
  }
  return 0;
}
