#ifndef XHC_RUNTIME_WORKER_PIPELINE_TEST_UTIL_H_
#define XHC_RUNTIME_WORKER_PIPELINE_TEST_UTIL_H_

// A whole pipeline in one process for the executor's tests: every rank a thread over
// FakeTransport, on the CPU path or on a device each, for kSteps steps; and the bit-for-bit
// comparison of two runs.

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/common/config.h"
#include "runtime/data/corpus.h"
#include "runtime/device/device.h"
#include "runtime/plan/plan.h"
#include "runtime/transport/fake_transport.h"
#include "runtime/worker/stage_executor.h"

namespace xhc::worker {

constexpr int kSteps = 3;

// `stage_layers`: extra pipeline keys ("first_stage_layers: 0, last_stage_layers: 3").
inline Config MakeConfig(const std::string& residual, const std::string& schedule, int chunks,
                         const std::string& stage_layers = "") {
  absl::StatusOr<Config> c = ParseConfig(absl::StrCat(
      "model: {d_model: 16, n_layers: 8, n_heads: 2, n_kv_heads: 1, d_ff: 32, seq_len: 8,\n"
      "        residual: ",
      residual,
      "}\n"
      "optim: {lr: 0.01, warmup_steps: 1}\n"
      "train: {steps: ",
      kSteps,
      ", batch_size: 2, microbatches: 8, seed: 5, eval_every: 0}\n"
      "pipeline: {schedule: ",
      schedule, ", chunks: ", chunks, stage_layers.empty() ? "" : ", ", stage_layers, "}\n"));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

inline Corpus MakeCorpus() {
  Corpus c;
  for (int i = 0; i < 20000; ++i)
    c.train.push_back(static_cast<uint8_t>("pipelines!"[i % 10] + i % 7));
  c.val = std::vector<uint8_t>(c.train.begin(), c.train.begin() + 2000);
  return c;
}

struct RunResult {
  std::vector<std::map<int, double>> losses;         // per step: micro-batch -> loss
  std::map<std::string, std::vector<float>> params;  // canonical copies, by spec name
  std::vector<absl::Status> errors;                  // per rank, first failure
  // Data parallelism: the parameters each replica > 0 holds that differ from replica 0's.
  std::vector<std::string> replica_mismatches;
  std::vector<std::vector<proto::Span>> spans;  // per rank, every step's
};

// Makes rank r's device (null: the CPU path); called once per rank before the run.
using DeviceFactory = std::function<std::unique_ptr<device::Device>(int rank)>;

// Runs `ranks` executors (times `data_parallel` replicas) as threads for kSteps steps, each
// on its device when `make_device` is given; `prepare` sees each executor before the run.
inline RunResult RunPipeline(const Config& config, int pipeline_ranks, int data_parallel = 1,
                             const DeviceFactory& make_device = nullptr,
                             const std::function<void(StageExecutor&)>& prepare = nullptr) {
  absl::StatusOr<plan::JobPlan> plan = plan::MakePlan(config, pipeline_ranks, data_parallel);
  EXPECT_TRUE(plan.ok()) << plan.status();
  const int ranks = plan->world_size();
  const Corpus corpus = MakeCorpus();
  auto world = FakeTransport::CreateWorld(ranks);
  std::vector<std::unique_ptr<device::Device>> devices(ranks);
  std::vector<std::unique_ptr<StageExecutor>> execs;
  for (int r = 0; r < ranks; ++r) {
    if (make_device) devices[r] = make_device(r);
    execs.push_back(std::make_unique<StageExecutor>(config, *plan, r, world[r].get(), &corpus,
                                                    devices[r].get()));
    if (prepare) prepare(*execs.back());
  }
  RunResult out;
  out.losses.resize(kSteps);
  out.spans.resize(ranks);
  out.errors.assign(ranks, absl::OkStatus());
  std::vector<std::vector<std::map<int, double>>> per_rank(
      ranks, std::vector<std::map<int, double>>(kSteps));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      for (int s = 0; s < kSteps; ++s) {
        absl::StatusOr<StepOutcome> o = execs[r]->RunStep(s, kSteps, false);
        if (!o.ok()) {
          out.errors[r] = o.status();
          return;
        }
        per_rank[r][s] = o->losses;
        for (proto::Span& span : o->spans) out.spans[r].push_back(std::move(span));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    for (int s = 0; s < kSteps; ++s) {
      for (const auto& [mb, loss] : per_rank[r][s]) out.losses[s][mb] = loss;
    }
    for (auto& [stage, ps] : execs[r]->Stages()) {
      if (!execs[r]->IsCanonical(stage)) continue;
      for (const auto& p : ps->all()) out.params[p->name] = p->value;
    }
  }
  // Every replica must hold replica 0's weights bit for bit (or they drift apart).
  for (int r = plan->num_ranks(); r < ranks; ++r) {
    for (auto& [stage, ps] : execs[r]->Stages()) {
      for (const auto& p : ps->all()) {
        const std::vector<float>& want = out.params.at(p->name);
        if (want.size() != p->value.size() ||
            std::memcmp(want.data(), p->value.data(), sizeof(float) * want.size()) != 0) {
          out.replica_mismatches.push_back(absl::StrCat("rank ", r, " ", p->name));
        }
      }
    }
  }
  return out;
}

// The first way `got` differs from `want` in losses or canonical parameters, bit for bit ("" when
// it does not).
inline std::string FirstRunDifference(const RunResult& want, const RunResult& got) {
  if (got.losses.size() != want.losses.size()) return "a different number of steps";
  for (size_t s = 0; s < want.losses.size(); ++s) {
    if (got.losses[s].size() != want.losses[s].size()) {
      return absl::StrCat("step ", s, ": ", got.losses[s].size(), " losses, want ",
                          want.losses[s].size());
    }
    for (const auto& [mb, loss] : want.losses[s]) {
      auto it = got.losses[s].find(mb);
      if (it == got.losses[s].end()) return absl::StrCat("step ", s, ": no micro-batch ", mb);
      if (std::memcmp(&it->second, &loss, sizeof(double)) != 0) {
        return absl::StrCat("step ", s, " micro-batch ", mb, ": ", it->second, " vs ", loss);
      }
    }
  }
  if (got.params.size() != want.params.size()) {
    return absl::StrCat(got.params.size(), " parameters, want ", want.params.size());
  }
  for (const auto& [name, v] : want.params) {
    auto it = got.params.find(name);
    if (it == got.params.end()) return name + " missing";
    if (it->second.size() != v.size() ||
        std::memcmp(it->second.data(), v.data(), sizeof(float) * v.size()) != 0) {
      return name + " differs";
    }
  }
  return "";
}

// Bit-for-bit equality of two runs' losses and canonical parameters.
inline void ExpectSameRun(const RunResult& want, const RunResult& got) {
  EXPECT_EQ(FirstRunDifference(want, got), "");
}

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_PIPELINE_TEST_UTIL_H_
