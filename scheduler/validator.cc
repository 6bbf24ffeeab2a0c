#include "scheduler/validator.h"

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "scheduler/grid.h"
#include "scheduler/simulator.h"

namespace xhc::scheduler {
namespace {

absl::Status Fail(const std::vector<std::vector<Action>>& lists, int r, int k,
                  const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("rank ", r, " step ", k, ": ", what, "\n", RenderGrid(lists, {{r, k}})));
}

bool InRange(const Schedule& s, int stage_idx, int mb) {
  return stage_idx >= 0 && stage_idx < s.num_stages && mb >= 0 && mb < s.num_microbatches;
}

// Ownership and ranges of one compute action.
absl::Status CheckCompute(const Schedule& s, const std::vector<std::vector<Action>>& lists, int r,
                          int k) {
  const Action& a = lists[r][k];
  std::vector<std::pair<int, int>> pieces = {{a.stage_idx, a.microbatch_idx}};
  if (a.type == ActionType::kOverlapFB) pieces.push_back({a.bwd_stage_idx, a.bwd_microbatch_idx});
  for (const auto& [st, j] : pieces) {
    if (!InRange(s, st, j)) return Fail(lists, r, k, "unknown stage or micro-batch");
    if (s.RankOf(st, j) != r) {
      return Fail(lists, r, k,
                  absl::StrCat("stage ", st, " of micro-batch ", j, " runs on rank ",
                               s.RankOf(st, j), ", not here"));
    }
  }
  return absl::OkStatus();
}

// Exactly one F and one B, or one I and one W, per (stage, micro-batch).
absl::Status CheckCounts(const Schedule& s, const std::vector<std::vector<Action>>& lists) {
  std::map<std::tuple<int, int, ActionType>, int> seen;
  for (int r = 0; r < static_cast<int>(lists.size()); ++r) {
    for (int k = 0; k < static_cast<int>(lists[r].size()); ++k) {
      const Action& a = lists[r][k];
      if (!a.IsCompute()) continue;
      RETURN_IF_ERROR(CheckCompute(s, lists, r, k));
      std::vector<Action> halves = {a};
      if (a.type == ActionType::kOverlapFB) halves = {a.ForwardHalf(), a.BackwardHalf()};
      for (const Action& h : halves) {
        if (++seen[{h.stage_idx, h.microbatch_idx, h.type}] > 1) {
          return Fail(lists, r, k, absl::StrCat(ToString(h), " appears twice"));
        }
      }
    }
  }
  auto count = [&](int st, int j, ActionType t) {
    auto it = seen.find({st, j, t});
    return it == seen.end() ? 0 : it->second;
  };
  for (int st = 0; st < s.num_stages; ++st) {
    for (int j = 0; j < s.num_microbatches; ++j) {
      const int f = count(st, j, ActionType::kForward), b = count(st, j, ActionType::kBackward);
      const int i = count(st, j, ActionType::kBackwardInput);
      const int w = count(st, j, ActionType::kBackwardWeight);
      if (f == 1 && ((b == 1 && i == 0 && w == 0) || (b == 0 && i == 1 && w == 1))) continue;
      return absl::InvalidArgumentError(absl::StrCat(
          "stage ", st, " micro-batch ", j, " has ", f, " F, ", b, " B, ", i, " I, ", w,
          " W; needs one F and either one B or one I and one W\n", RenderGrid(lists)));
    }
  }
  return absl::OkStatus();
}

using CommKey = std::tuple<bool, int, int, int, int>;  // backward, recv stage, mb, from, to

// SEND/RECV pairing and receive-before-use, for lowered lists.
absl::Status CheckComm(const Schedule& s, const std::vector<std::vector<Action>>& lists) {
  std::map<CommKey, std::pair<int, int>> sends, recvs;  // -> (rank, step)
  for (int r = 0; r < static_cast<int>(lists.size()); ++r) {
    std::set<std::tuple<bool, int, int>> posted;
    for (int k = 0; k < static_cast<int>(lists[r].size()); ++k) {
      const Action& a = lists[r][k];
      const bool bwd = a.type == ActionType::kSendB || a.type == ActionType::kRecvB;
      if (a.type == ActionType::kSendF || a.type == ActionType::kSendB) {
        const CommKey key{bwd, a.stage_idx + (bwd ? -1 : 1), a.microbatch_idx, r, a.peer_rank};
        if (!sends.emplace(key, std::make_pair(r, k)).second)
          return Fail(lists, r, k, "duplicate send");
      } else if (a.type == ActionType::kRecvF || a.type == ActionType::kRecvB) {
        const CommKey key{bwd, a.stage_idx, a.microbatch_idx, a.peer_rank, r};
        if (!recvs.emplace(key, std::make_pair(r, k)).second)
          return Fail(lists, r, k, "duplicate receive");
        posted.insert({bwd, a.stage_idx, a.microbatch_idx});
      } else if (a.IsCompute() && a.type != ActionType::kBackwardWeight) {
        std::vector<std::tuple<bool, int, int>> needs;
        const bool is_b = a.type != ActionType::kForward;
        if (a.type == ActionType::kOverlapFB)
          needs.push_back({true, a.bwd_stage_idx, a.bwd_microbatch_idx});
        needs.push_back({is_b && a.type != ActionType::kOverlapFB, a.stage_idx, a.microbatch_idx});
        for (const auto& [nb, st, j] : needs) {
          const int src = nb ? st + 1 : st - 1;
          if (src < 0 || src >= s.num_stages || s.RankOf(src, j) == r) continue;
          if (!posted.count({nb, st, j}))
            return Fail(lists, r, k, "input is never received before use");
        }
      }
    }
  }
  for (const auto& [key, where] : sends) {
    if (!recvs.count(key))
      return Fail(lists, where.first, where.second, "send has no matching receive");
  }
  for (const auto& [key, where] : recvs) {
    if (!sends.count(key))
      return Fail(lists, where.first, where.second, "receive has no matching send");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ValidationReport> ValidateLists(const Schedule& layout,
                                               const std::vector<std::vector<Action>>& lists) {
  if (static_cast<int>(lists.size()) != layout.num_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat(lists.size(), " rank lists for ", layout.num_ranks, " ranks"));
  }
  RETURN_IF_ERROR(CheckCounts(layout, lists));
  bool lowered = false;
  for (const auto& list : lists) {
    for (const Action& a : list) lowered = lowered || a.IsComm();
  }
  std::vector<std::vector<Action>> runnable = lowered ? lists : LowerActions(layout, lists);
  if (lowered) RETURN_IF_ERROR(CheckComm(layout, runnable));
  absl::StatusOr<SimResult> run = Simulate(layout, runnable, SimCosts{});
  if (!run.ok()) return run.status();
  return ValidationReport{PeakActivations(lists)};
}

absl::StatusOr<ValidationReport> Validate(const Schedule& schedule) {
  RETURN_IF_ERROR(ValidateLists(schedule, schedule.Lower()).status());
  return ValidateLists(schedule, schedule.rank_actions);
}

}  // namespace xhc::scheduler
