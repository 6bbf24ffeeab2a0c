#include "runtime/lab/study/measure.h"

#include <algorithm>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace xhc::study {
namespace {

using nlohmann::json;

void AddPerRank(const json& row, const char* key, std::vector<double>* sums, bool take_max) {
  if (!row.contains(key) || !row[key].is_array()) return;
  const json& values = row[key];
  if (sums->size() < values.size()) sums->resize(values.size(), 0.0);
  for (size_t r = 0; r < values.size(); ++r) {
    const double v = values[r].get<double>();
    (*sums)[r] = take_max ? std::max((*sums)[r], v) : (*sums)[r] + v;
  }
}

// "F3.7" -> kind 'F', stage 3, micro-batch 7; false for other names.
bool ParseComputeName(const std::string& name, char* kind, int* stage, int* mb) {
  if (name.size() < 4 || (name[0] != 'F' && name[0] != 'I' && name[0] != 'W')) return false;
  std::vector<std::string> parts = absl::StrSplit(name.substr(1), '.');
  if (parts.size() != 2) return false;
  *kind = name[0];
  return absl::SimpleAtoi(parts[0], stage) && absl::SimpleAtoi(parts[1], mb);
}

struct Span {
  std::string name;
  int rank = 0;
  int tid = 0;
  double ts = 0, dur = 0;  // µs
  int step = 0;            // 0-based, assigned by SplitSteps
};

// Each rank's spans in time order; its step index advances after each "optimizer" span.
void SplitSteps(std::vector<Span>& spans) {
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.ts < b.ts;
  });
  int rank = -1, step = 0;
  for (Span& s : spans) {
    if (s.rank != rank) rank = s.rank, step = 0;
    s.step = step;
    if (s.tid == 0 && s.name == "optimizer") ++step;
  }
}

// Producer of a received tensor: F of the previous stage, or I of the next one.
std::string ProducerOf(const std::string& recv_name) {
  char kind;
  int stage, mb;
  if (!ParseComputeName(recv_name.substr(5).replace(0, 1, "F"), &kind, &stage, &mb)) return "";
  return recv_name[5] == 'F' ? absl::StrCat("F", stage - 1, ".", mb)
                             : absl::StrCat("I", stage + 1, ".", mb);
}

void MeasureTransfers(const std::vector<Span>& spans, int warmup, TraceMeasurement* m) {
  std::map<std::pair<int, std::string>, double> compute_end;  // (step, name) -> end µs
  // Where a receive's wait began before its data was sent, the executor split it into
  // "wait peer <recv>" (the peer still computing) and "<recv>": the wait began at the first.
  std::map<std::tuple<int, int, std::string>, double> wait_start;  // (rank, step, recv) -> µs
  for (const Span& s : spans) {
    if (s.tid == 0) compute_end[{s.step, s.name}] = s.ts + s.dur;
    if (s.name.rfind("wait peer ", 0) == 0) wait_start[{s.rank, s.step, s.name.substr(10)}] = s.ts;
  }
  std::vector<double> samples;
  for (const Span& s : spans) {
    if (s.tid != 1 || s.step < warmup || s.name.rfind("recv ", 0) != 0) continue;
    auto it = compute_end.find({s.step, ProducerOf(s.name)});
    if (it == compute_end.end()) continue;
    // Only receives already waiting when the producer finished: their wait ended when the
    // data was there, so arrival - producer's end is the whole transfer. A wait that began
    // later may have found the data there and spent its time on something else: a
    // transport that copies inside the wait (docs/design/pipeline-wait-accounting.md) makes
    // every such wait look like a transfer hundreds of ms long (a simulated bubble of 0.24).
    auto started = wait_start.find({s.rank, s.step, s.name});
    const double start = started != wait_start.end() ? started->second : s.ts;
    if (start > it->second) continue;
    const double transfer = s.ts + s.dur - it->second;
    if (transfer > 0) samples.push_back(transfer / 1000.0);
  }
  if (samples.empty()) return;
  std::sort(samples.begin(), samples.end());
  m->transfer_ms = samples[samples.size() / 2];
  m->transfer_samples = static_cast<int>(samples.size());
}

}  // namespace

absl::StatusOr<StepMetrics> ParseMetrics(const std::string& jsonl_text, int warmup_steps) {
  StepMetrics m;
  std::istringstream in(jsonl_text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!row.is_discarded() && row.contains("checkpoint_step")) continue;  // checkpoint rows
    if (row.is_discarded() || !row.contains("step")) {
      return absl::DataLossError(absl::StrCat("metrics.jsonl line ", line_no, ": not a step row"));
    }
    if (row["step"].get<int>() <= warmup_steps) continue;
    ++m.num_steps;
    m.tokens_per_s += row.value("tokens_per_s", 0.0);
    m.step_s += row.value("step_s", 0.0);
    m.loss = row.value("loss", 0.0);
    AddPerRank(row, "exposed_comm", &m.exposed_comm, false);
    AddPerRank(row, "other_cpu", &m.other_cpu, false);
    AddPerRank(row, "peak_rss_mb", &m.peak_rss_mb, true);
  }
  if (m.num_steps == 0) {
    return absl::DataLossError(
        absl::StrCat("metrics.jsonl: no step after the ", warmup_steps, " warm-up step(s)"));
  }
  m.tokens_per_s /= m.num_steps;
  m.step_s /= m.num_steps;
  for (double& v : m.exposed_comm) v /= m.num_steps;
  for (double& v : m.other_cpu) v /= m.num_steps;
  return m;
}

absl::StatusOr<TraceMeasurement> ParseTrace(const std::string& trace_json, int num_ranks,
                                            int warmup_steps) {
  json root = json::parse(trace_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.contains("traceEvents")) {
    return absl::DataLossError("trace.json: not a Chrome trace (no traceEvents)");
  }
  std::vector<Span> spans;
  for (const json& e : root["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    spans.push_back({e.value("name", ""), e.value("pid", 0), e.value("tid", 0), e.value("ts", 0.0),
                     e.value("dur", 0.0), 0});
  }
  SplitSteps(spans);
  TraceMeasurement m;
  m.bubble.assign(num_ranks, 0.0);
  std::map<int, std::pair<double, double>> window;  // step -> [first start, last end]
  std::map<std::pair<int, int>, double> busy;       // (step, rank) -> compute µs
  for (const Span& s : spans) {
    char kind;
    int stage, mb;
    if (s.tid != 0 || s.step < warmup_steps || !ParseComputeName(s.name, &kind, &stage, &mb)) {
      continue;
    }
    auto [it, fresh] = window.try_emplace(s.step, s.ts, s.ts + s.dur);
    if (!fresh) {
      it->second.first = std::min(it->second.first, s.ts);
      it->second.second = std::max(it->second.second, s.ts + s.dur);
    }
    busy[{s.step, s.rank}] += s.dur;
    StageCosts& c = m.stages[stage];
    (kind == 'F' ? c.f : kind == 'I' ? c.i : c.w) += s.dur / 1000.0;
    if (kind == 'F') ++c.count;
  }
  if (window.empty()) {
    return absl::DataLossError(
        absl::StrCat("trace.json: no F/I/W span after the ", warmup_steps, " warm-up step(s)"));
  }
  double total_window = 0;
  for (const auto& [step, w] : window) {
    m.window_ms.push_back((w.second - w.first) / 1000.0);
    total_window += w.second - w.first;
  }
  for (int r = 0; r < num_ranks; ++r) {
    double compute = 0;
    for (const auto& [step, w] : window) {
      auto it = busy.find({step, r});
      if (it != busy.end()) compute += it->second;
    }
    m.bubble[r] = std::clamp(1.0 - compute / std::max(total_window, 1e-9), 0.0, 1.0);
    m.compute_ms.push_back(compute / 1000.0 / window.size());
  }
  for (auto& [stage, c] : m.stages) {
    const double n = std::max(c.count, 1);
    c.f /= n, c.i /= n, c.w /= n;
  }
  MeasureTransfers(spans, warmup_steps, &m);
  return m;
}

StageCosts MeanStageCosts(const TraceMeasurement& trace) {
  StageCosts mean;
  for (const auto& [stage, c] : trace.stages) {
    mean.f += c.f, mean.i += c.i, mean.w += c.w;
    mean.count += c.count;
  }
  const double n = std::max<size_t>(trace.stages.size(), 1);
  mean.f /= n, mean.i /= n, mean.w /= n;
  return mean;
}

}  // namespace xhc::study
