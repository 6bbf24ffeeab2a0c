#include "scheduler/simulator.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "scheduler/grid.h"

namespace xhc::scheduler {
namespace {

// (is_backward, stage, micro-batch).
using Key = std::tuple<bool, int, int>;

class Simulator {
 public:
  Simulator(const Schedule& layout, const std::vector<std::vector<Action>>& lists,
            const SimCosts& costs)
      : layout_(layout), lists_(lists), costs_(costs), ranks_(lists.size()) {
    result_.busy.assign(lists.size(), 0.0);
    result_.exposed_comm.assign(lists.size(), 0.0);
    result_.timeline.assign(lists.size(), {});
  }

  absl::StatusOr<SimResult> Run();

 private:
  struct RankState {
    size_t pc = 0;
    double clock = 0.0;      // compute stream free
    double comm_free = 0.0;  // communication stream free
  };
  bool Step(int r);
  bool StepCompute(int r, const Action& a);
  bool StepSend(int r, const Action& a);
  // End time of the input a piece needs on rank r, and of its producer's compute.
  bool InputReady(int r, bool backward, int stage_idx, int mb, double& ready, double& produced);
  double CostOf(const Action& a) const;
  void FinishReduces();

  const Schedule& layout_;
  const std::vector<std::vector<Action>>& lists_;
  const SimCosts& costs_;
  std::vector<RankState> ranks_;
  std::map<Key, double> done_;     // local compute results: F output, B/I output
  std::map<Key, double> arrived_;  // data at the consumer, keyed by the receiving stage
  std::map<std::pair<int, int>, double> reduce_post_;  // (stage, rank) -> post time
  SimResult result_;
};

double Simulator::CostOf(const Action& a) const {
  switch (a.type) {
    case ActionType::kForward: return costs_.f;
    case ActionType::kBackward: return costs_.b;
    case ActionType::kBackwardInput: return costs_.i;
    case ActionType::kBackwardWeight: return costs_.w;
    default: return costs_.FB();
  }
}

bool Simulator::InputReady(int r, bool backward, int s, int j, double& ready, double& produced) {
  const int src_stage = backward ? s + 1 : s - 1;
  if (backward) {  // the activations of this stage's own forward
    auto own = done_.find({false, s, j});
    if (own == done_.end()) return false;
    ready = std::max(ready, own->second);
    produced = std::max(produced, own->second);
  }
  if (src_stage < 0 || src_stage >= layout_.num_stages) return true;
  auto prod = done_.find({backward, src_stage, j});
  if (prod == done_.end()) return false;
  produced = std::max(produced, prod->second);
  if (layout_.RankOf(src_stage, j) == r) {
    ready = std::max(ready, prod->second);
    return true;
  }
  auto arr = arrived_.find({backward, s, j});
  if (arr == arrived_.end()) return false;
  ready = std::max(ready, arr->second);
  return true;
}

bool Simulator::StepCompute(int r, const Action& a) {
  RankState& st = ranks_[r];
  double ready = st.clock, produced = st.clock;
  bool ok = true;
  switch (a.type) {
    case ActionType::kBackwardWeight: {
      auto in = done_.find({true, a.stage_idx, a.microbatch_idx});
      ok = in != done_.end();
      if (ok) ready = produced = std::max(ready, in->second);
      break;
    }
    case ActionType::kOverlapFB:
      ok = InputReady(r, false, a.stage_idx, a.microbatch_idx, ready, produced) &&
           InputReady(r, true, a.bwd_stage_idx, a.bwd_microbatch_idx, ready, produced);
      break;
    default:
      ok = InputReady(r, a.type != ActionType::kForward, a.stage_idx, a.microbatch_idx, ready,
                      produced);
  }
  if (!ok) return false;
  const double end = ready + CostOf(a);
  result_.exposed_comm[r] += ready - std::max(produced, st.clock);
  result_.busy[r] += CostOf(a);
  result_.timeline[r].push_back({a, ready, end, false});
  st.clock = end;
  double f_out = end, b_out = end;  // when the forward / input-gradient output exists
  if (costs_.sequential_pieces && a.type == ActionType::kOverlapFB) {
    f_out = ready + costs_.f;
    b_out = f_out + costs_.i;
  }
  if (costs_.sequential_pieces && a.type == ActionType::kBackward) b_out = ready + costs_.i;
  if (a.type == ActionType::kForward || a.type == ActionType::kOverlapFB) {
    done_[{false, a.stage_idx, a.microbatch_idx}] = f_out;
  }
  if (a.type == ActionType::kBackward || a.type == ActionType::kBackwardInput) {
    done_[{true, a.stage_idx, a.microbatch_idx}] = b_out;
  }
  if (a.type == ActionType::kOverlapFB)
    done_[{true, a.bwd_stage_idx, a.bwd_microbatch_idx}] = b_out;
  return true;
}

bool Simulator::StepSend(int r, const Action& a) {
  const bool backward = a.type == ActionType::kSendB;
  auto prod = done_.find({backward, a.stage_idx, a.microbatch_idx});
  if (prod == done_.end()) return false;  // sent before it was computed: never resolves
  RankState& st = ranks_[r];
  const double start = std::max(prod->second, st.comm_free);
  st.comm_free = start + costs_.P2PTime(costs_.payload_bytes);
  arrived_[{backward, a.stage_idx + (backward ? -1 : 1), a.microbatch_idx}] = st.comm_free;
  result_.timeline[r].push_back({a, start, st.comm_free, true});
  return true;
}

bool Simulator::Step(int r) {
  RankState& st = ranks_[r];
  const Action& a = lists_[r][st.pc];
  bool ok = true;
  switch (a.type) {
    case ActionType::kRecvF:
    case ActionType::kRecvB:
      // A non-blocking post; its span on the timeline is filled in once data arrives.
      result_.timeline[r].push_back({a, st.clock, -1.0, true});
      break;
    case ActionType::kSendF:
    case ActionType::kSendB: ok = StepSend(r, a); break;
    case ActionType::kReduceGrad: reduce_post_[{a.stage_idx, r}] = st.clock; break;
    default: ok = StepCompute(r, a);
  }
  if (ok) ++st.pc;
  return ok;
}

void Simulator::FinishReduces() {
  for (int r = 0; r < static_cast<int>(lists_.size()); ++r) {
    for (const Action& a : lists_[r]) {
      if (a.type != ActionType::kReduceGrad) continue;
      auto peer = reduce_post_.find({a.stage_idx, a.peer_rank});
      const double mine = reduce_post_[{a.stage_idx, r}];
      const double start = std::max(mine, peer == reduce_post_.end() ? mine : peer->second);
      const double end = start + costs_.P2PTime(costs_.reduce_bytes);
      result_.timeline[r].push_back({a, start, end, true});
      result_.makespan = std::max(result_.makespan, end);
    }
  }
  for (auto& rank_line : result_.timeline) {
    for (TimedAction& t : rank_line) {
      if (t.end >= 0) continue;
      const bool backward = t.action.type == ActionType::kRecvB;
      t.end = arrived_[{backward, t.action.stage_idx, t.action.microbatch_idx}];
      t.start = std::min(t.start, t.end);
    }
  }
}

absl::StatusOr<SimResult> Simulator::Run() {
  const int num_ranks = static_cast<int>(lists_.size());
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < num_ranks; ++r) {
      while (ranks_[r].pc < lists_[r].size() && Step(r)) progress = true;
    }
  }
  std::vector<GridMark> stuck;
  for (int r = 0; r < num_ranks; ++r) {
    if (ranks_[r].pc < lists_[r].size()) stuck.push_back({r, static_cast<int>(ranks_[r].pc)});
  }
  if (!stuck.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "deadlock: no rank can proceed; each stuck action waits for an input that is never "
        "produced or sent\n",
        RenderGrid(lists_, stuck)));
  }
  for (int r = 0; r < num_ranks; ++r)
    result_.makespan = std::max(result_.makespan, ranks_[r].clock);
  FinishReduces();
  for (int r = 0; r < num_ranks; ++r) {
    result_.bubble.push_back(result_.makespan - result_.busy[r]);
    result_.bubble_fraction.push_back(
        result_.makespan > 0 ? result_.bubble.back() / result_.makespan : 0.0);
  }
  result_.peak_activations = PeakActivations(lists_);
  for (int peak : result_.peak_activations) {
    result_.peak_activation_bytes.push_back(peak * costs_.activation_bytes);
  }
  return std::move(result_);
}

}  // namespace

double SimCosts::FB() const {
  if (fb >= 0) return fb;
  return f + b - fb_overlap * std::min(f, b);
}

double SimCosts::P2PTime(double bytes) const {
  double ms = latency_us / 1000.0;
  if (bandwidth_gbps > 0) ms += bytes * 8.0 / (bandwidth_gbps * 1e9) * 1000.0;
  return ms;
}

std::vector<int> PeakActivations(const std::vector<std::vector<Action>>& lists) {
  std::vector<int> peaks;
  for (const auto& list : lists) {
    int live = 0, peak = 0;
    for (const Action& a : list) {
      switch (a.type) {
        case ActionType::kForward: peak = std::max(peak, ++live); break;
        case ActionType::kBackward:
        case ActionType::kBackwardWeight: --live; break;
        case ActionType::kOverlapFB:
          peak = std::max(peak, ++live);
          --live;
          break;
        default: break;
      }
    }
    peaks.push_back(peak);
  }
  return peaks;
}

absl::StatusOr<SimResult> Simulate(const Schedule& layout,
                                   const std::vector<std::vector<Action>>& lowered,
                                   const SimCosts& costs) {
  if (static_cast<int>(lowered.size()) != layout.num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulate: ", lowered.size(), " rank lists for ", layout.num_ranks, " ranks"));
  }
  return Simulator(layout, lowered, costs).Run();
}

absl::StatusOr<SimResult> Simulate(const Schedule& schedule, const SimCosts& costs) {
  return Simulate(schedule, schedule.Lower(), costs);
}

}  // namespace xhc::scheduler
