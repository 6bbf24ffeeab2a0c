#include "scheduler/schedule.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "scheduler/schedule_builders.h"

namespace xhc::scheduler {
namespace {

constexpr int kMaxRanks = 1024;
constexpr int kMaxMicrobatches = 1 << 16;

// Types whose rank r holds stages r, r+R, ..., r+(V-1)R (V = num_chunks).
bool IsLooped(const std::string& type) {
  return type == "interleaved1f1b" || type == "interleaved_zb" || type == "looped_bfs";
}

// Types with 2R stages in a V: rank r holds stages r and 2R-1-r.
bool IsVShaped(const std::string& type) { return type == "dualpipev" || type == "zbv"; }

absl::Status CheckRequest(const std::string& type, const ScheduleRequest& req) {
  const int R = req.num_ranks, M = req.num_microbatches, V = req.num_chunks;
  if (R < 1 || R > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks must be in [1, ", kMaxRanks, "], got ", R));
  }
  if (M < 1 || M > kMaxMicrobatches) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batches must be in [1, ", kMaxMicrobatches, "], got ", M));
  }
  if (V < 1) return absl::InvalidArgumentError(absl::StrCat("chunks must be >= 1, got ", V));
  if (!IsLooped(type) && V != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "only interleaved1f1b, interleaved_zb and looped_bfs take chunks > 1; ", type, " got ", V));
  }
  if (type == "interleaved1f1b" && M % R != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "interleaved1f1b needs micro-batches divisible by ranks (Megatron rounds of R); got ", M,
        " micro-batches for ", R, " ranks"));
  }
  if (type == "dualpipe") {
    if (R % 2 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("dualpipe needs an even number of ranks, got ", R));
    }
    if (M % 2 != 0 || M < MinMicrobatches(type, R)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dualpipe needs an even number of micro-batches >= 2*ranks (", 2 * R, "), got ", M));
    }
  }
  if (type == "dualpipev" && M < MinMicrobatches(type, R)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dualpipev needs micro-batches >= 2*ranks (", 2 * R, "), got ", M));
  }
  // PyTorch's flexible rounds: max(1, M / R) rounds of equal size.
  const int num_rounds = std::max(1, M / R);
  if (type == "interleaved_zb" && M % num_rounds != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("interleaved_zb needs micro-batches divisible by the number of rounds max(1, "
                     "micro-batches / ranks) = ",
                     num_rounds, "; got ", M, " micro-batches for ", R, " ranks"));
  }
  return absl::OkStatus();
}

// Fills num_stages, stage_mb_rank and rank_stages for a built-in type.
void SetLayout(Schedule& s) {
  const int R = s.num_ranks, M = s.num_microbatches;
  s.num_stages = IsLooped(s.type) ? R * s.num_chunks : IsVShaped(s.type) ? 2 * R : R;
  s.stage_mb_rank.assign(s.num_stages, std::vector<int>(M, 0));
  for (int st = 0; st < s.num_stages; ++st) {
    for (int j = 0; j < M; ++j) {
      int rank = st % R;  // gpipe, 1f1b, zb1p and the looped types
      if (s.type == "dualpipe" && j >= M / 2) rank = R - 1 - st;
      if (IsVShaped(s.type) && st >= R) rank = 2 * R - 1 - st;
      s.stage_mb_rank[st][j] = rank;
    }
  }
  s.rank_stages.assign(R, {});
  for (int st = 0; st < s.num_stages; ++st) {
    for (int r : s.StageToRanks(st)) s.rank_stages[r].push_back(st);
  }
}

// The rank that consumes the output of compute `a` (forward or backward half), or -1 when
// the action has no successor (first stage's backward, last stage's forward feeds the loss).
int ConsumerRank(const Schedule& s, ActionType type, int stage_idx, int mb) {
  if (type == ActionType::kForward) {
    return stage_idx + 1 < s.num_stages ? s.RankOf(stage_idx + 1, mb) : -1;
  }
  return stage_idx > 0 ? s.RankOf(stage_idx - 1, mb) : -1;
}

// The F / B(or I) pieces of a compute action: (is_forward, stage, mb).
struct Piece {
  bool forward;
  int stage_idx;
  int mb;
};

std::vector<Piece> PiecesOf(const Action& a) {
  switch (a.type) {
    case ActionType::kForward: return {{true, a.stage_idx, a.microbatch_idx}};
    case ActionType::kBackward:
    case ActionType::kBackwardInput: return {{false, a.stage_idx, a.microbatch_idx}};
    case ActionType::kOverlapFB:
      return {{true, a.stage_idx, a.microbatch_idx},
              {false, a.bwd_stage_idx, a.bwd_microbatch_idx}};
    default: return {};
  }
}

// Receives that compute `a` on `rank` needs from other ranks.
std::vector<Action> RecvsFor(const Schedule& s, int rank, const Action& a) {
  std::vector<Action> out;
  for (const Piece& p : PiecesOf(a)) {
    const int src_stage = p.forward ? p.stage_idx - 1 : p.stage_idx + 1;
    if (src_stage < 0 || src_stage >= s.num_stages) continue;
    const int src = s.RankOf(src_stage, p.mb);
    if (src == rank) continue;
    out.push_back(
        Action::Comm(p.forward ? ActionType::kRecvF : ActionType::kRecvB, p.stage_idx, p.mb, src));
  }
  return out;
}

std::vector<Action> SendsFor(const Schedule& s, int rank, const Action& a) {
  std::vector<Action> out;
  for (const Piece& p : PiecesOf(a)) {
    const ActionType t = p.forward ? ActionType::kForward : ActionType::kBackward;
    const int dst = ConsumerRank(s, t, p.stage_idx, p.mb);
    if (dst < 0 || dst == rank) continue;
    out.push_back(
        Action::Comm(p.forward ? ActionType::kSendF : ActionType::kSendB, p.stage_idx, p.mb, dst));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> CanonicalType(const std::string& type) {
  // Case, '-' and '_' do not matter; PyTorch's class names (ScheduleZBVZeroBubble minus
  // "Schedule") are accepted too.
  static const std::map<std::string, std::string> kSpellings = {
      {"gpipe", "gpipe"},
      {"1f1b", "1f1b"},
      {"interleaved1f1b", "interleaved1f1b"},
      {"zb1p", "zb1p"},
      {"dualpipe", "dualpipe"},
      {"dualpipev", "dualpipev"},
      {"zbv", "zbv"},
      {"zbvzerobubble", "zbv"},
      {"interleavedzb", "interleaved_zb"},
      {"interleavedzerobubble", "interleaved_zb"},
      {"loopedbfs", "looped_bfs"},
  };
  std::string t = absl::AsciiStrToLower(type);
  t = absl::StrReplaceAll(t, {{"-", ""}, {"_", ""}});
  auto it = kSpellings.find(t);
  if (it != kSpellings.end()) return it->second;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown schedule type '", type,
      "'; known: gpipe, 1f1b, interleaved1f1b, zb1p, dualpipe, dualpipev, zbv, interleaved_zb, "
      "looped_bfs"));
}

int MinMicrobatches(const std::string& type, int num_ranks) {
  return type == "dualpipe" || type == "dualpipev" ? 2 * num_ranks : 1;
}

std::vector<int> Schedule::StageToRanks(int stage_idx) const {
  std::vector<int> ranks(stage_mb_rank[stage_idx].begin(), stage_mb_rank[stage_idx].end());
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::vector<int> Schedule::LossRanks() const {
  std::vector<int> ranks;
  for (int j = 0; j < num_microbatches; ++j) {
    const int r = RankOf(loss_stage(), j);
    if (std::find(ranks.begin(), ranks.end(), r) == ranks.end()) ranks.push_back(r);
  }
  return ranks;
}

std::vector<std::vector<Action>> Schedule::Lower() const {
  return LowerActions(*this, rank_actions);
}

std::vector<std::vector<Action>> LowerActions(const Schedule& layout,
                                              const std::vector<std::vector<Action>>& lists) {
  const Schedule& s = layout;
  std::vector<std::vector<Action>> out(lists.size());
  for (int r = 0; r < static_cast<int>(lists.size()); ++r) {
    const auto& compute = lists[r];
    auto& list = out[r];
    // A held stage's REDUCE_GRAD goes right after the action that completes its weight
    // gradients here (see header; docs/design/dualpipe-mirror-exchange.md); one that none
    // completes, at the end.
    std::map<size_t, std::vector<int>> reduce_after;
    std::vector<int> reduce_at_end;
    for (int st : s.rank_stages[r]) {
      if (s.StageToRanks(st).size() < 2) continue;
      std::optional<size_t> last;
      for (size_t k = 0; k < compute.size(); ++k) {
        if (compute[k].WeightGradStage() == st) last = k;
      }
      if (last) {
        reduce_after[*last].push_back(st);
      } else {
        reduce_at_end.push_back(st);
      }
    }
    auto push_reduces = [&](const std::vector<int>& stages) {
      for (int st : stages) {
        for (int peer : s.StageToRanks(st)) {
          if (peer != r) list.push_back(Action::Comm(ActionType::kReduceGrad, st, -1, peer));
        }
      }
    };
    for (size_t k = 0; k < compute.size(); ++k) {
      // Post the receives of action k+1 before running action k (see header).
      if (k == 0) {
        for (const Action& a : RecvsFor(s, r, compute[0])) list.push_back(a);
      }
      if (k + 1 < compute.size()) {
        for (const Action& a : RecvsFor(s, r, compute[k + 1])) list.push_back(a);
      }
      list.push_back(compute[k]);
      for (const Action& a : SendsFor(s, r, compute[k])) list.push_back(a);
      if (auto it = reduce_after.find(k); it != reduce_after.end()) push_reduces(it->second);
    }
    push_reduces(reduce_at_end);
  }
  return out;
}

absl::StatusOr<Schedule> BuildSchedule(const ScheduleRequest& request) {
  absl::StatusOr<std::string> type = CanonicalType(request.type);
  if (!type.ok()) return type.status();
  if (absl::Status st = CheckRequest(*type, request); !st.ok()) return st;
  Schedule s;
  s.type = *type;
  s.num_ranks = request.num_ranks;
  s.num_microbatches = request.num_microbatches;
  s.num_chunks = request.num_chunks;
  SetLayout(s);
  const int R = s.num_ranks, M = s.num_microbatches;
  if (s.type == "gpipe") s.rank_actions = internal::BuildGPipe(R, M);
  if (s.type == "1f1b") s.rank_actions = internal::Build1F1B(R, M);
  if (s.type == "interleaved1f1b") {
    s.rank_actions = internal::BuildInterleaved1F1B(R, M, s.num_chunks);
  }
  if (s.type == "zb1p") s.rank_actions = internal::BuildZB1P(R, M);
  if (s.type == "dualpipe") s.rank_actions = internal::BuildDualPipe(R, M);
  if (s.type == "dualpipev") s.rank_actions = internal::BuildDualPipeV(R, M);
  if (s.type == "zbv") s.rank_actions = internal::BuildZBV(R, M);
  if (s.type == "interleaved_zb") {
    s.rank_actions = internal::BuildInterleavedZB(R, M, s.num_chunks);
  }
  if (s.type == "looped_bfs") s.rank_actions = internal::BuildLoopedBFS(R, M, s.num_chunks);
  return s;
}

absl::Status FillPeers(const Schedule& s, std::vector<std::vector<Action>>& lists) {
  for (int r = 0; r < static_cast<int>(lists.size()); ++r) {
    for (Action& a : lists[r]) {
      if (a.IsCompute()) continue;
      const bool bad_stage = a.stage_idx < 0 || a.stage_idx >= s.num_stages;
      const bool bad_mb = a.type != ActionType::kReduceGrad &&
                          (a.microbatch_idx < 0 || a.microbatch_idx >= s.num_microbatches);
      if (bad_stage || bad_mb) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", r, ": ", ToString(a), " names an unknown stage or micro-batch"));
      }
      const int s_idx = a.stage_idx, j = a.microbatch_idx;
      switch (a.type) {
        case ActionType::kSendF:
          a.peer_rank = ConsumerRank(s, ActionType::kForward, s_idx, j);
          break;
        case ActionType::kSendB:
          a.peer_rank = ConsumerRank(s, ActionType::kBackward, s_idx, j);
          break;
        case ActionType::kRecvF: a.peer_rank = s_idx > 0 ? s.RankOf(s_idx - 1, j) : -1; break;
        case ActionType::kRecvB:
          a.peer_rank = s_idx + 1 < s.num_stages ? s.RankOf(s_idx + 1, j) : -1;
          break;
        default: {  // REDUCE_GRAD: the other replica of the stage.
          a.peer_rank = -1;
          for (int peer : s.StageToRanks(s_idx)) {
            if (peer != r) a.peer_rank = peer;
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Schedule> ScheduleFromActions(const std::vector<std::vector<Action>>& lists) {
  Schedule s;
  s.type = "custom";
  s.num_ranks = static_cast<int>(lists.size());
  // Sizes in int64: an index of INT_MAX (from a CSV) must not overflow the + 1.
  int64_t num_stages = 0, num_microbatches = 0, num_forwards = 0;
  for (const auto& list : lists) {
    for (const Action& a : list) {
      num_stages = std::max({num_stages, int64_t{a.stage_idx} + 1, int64_t{a.bwd_stage_idx} + 1});
      num_microbatches = std::max(
          {num_microbatches, int64_t{a.microbatch_idx} + 1, int64_t{a.bwd_microbatch_idx} + 1});
      num_forwards += a.type == ActionType::kForward || a.type == ActionType::kOverlapFB;
    }
  }
  if (s.num_ranks == 0 || num_stages == 0 || num_microbatches == 0) {
    return absl::InvalidArgumentError("schedule has no ranks or no actions");
  }
  // Every (stage, micro-batch) runs forward exactly once, so the ownership table below can
  // be no larger than the forwards listed: a CSV naming stage 50022502 is refused here
  // instead of allocating 50022502 rows (found by torch_csv_fuzzer).
  if (num_stages * num_microbatches > num_forwards) {
    return absl::InvalidArgumentError(
        absl::StrCat("actions name stages up to ", num_stages - 1, " and micro-batches up to ",
                     num_microbatches - 1, ": that needs ", num_stages * num_microbatches,
                     " forwards, but only ", num_forwards, " are listed"));
  }
  s.num_stages = static_cast<int>(num_stages);
  s.num_microbatches = static_cast<int>(num_microbatches);
  s.stage_mb_rank.assign(s.num_stages, std::vector<int>(s.num_microbatches, -1));
  for (int r = 0; r < s.num_ranks; ++r) {
    for (const Action& a : lists[r]) {
      if (a.type != ActionType::kForward && a.type != ActionType::kOverlapFB) continue;
      int& owner = s.stage_mb_rank[a.stage_idx][a.microbatch_idx];
      if (owner >= 0 && owner != r) {
        return absl::InvalidArgumentError(
            absl::StrCat(ToString(Action::F(a.stage_idx, a.microbatch_idx)), " runs on ranks ",
                         owner, " and ", r));
      }
      owner = r;
    }
  }
  for (int st = 0; st < s.num_stages; ++st) {
    for (int j = 0; j < s.num_microbatches; ++j) {
      if (s.stage_mb_rank[st][j] < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("no rank runs ", ToString(Action::F(st, j))));
      }
    }
  }
  s.rank_stages.assign(s.num_ranks, {});
  for (int st = 0; st < s.num_stages; ++st) {
    for (int r : s.StageToRanks(st)) s.rank_stages[r].push_back(st);
  }
  s.rank_actions.assign(s.num_ranks, {});
  for (int r = 0; r < s.num_ranks; ++r) {
    for (const Action& a : lists[r]) {
      if (a.IsCompute()) s.rank_actions[r].push_back(a);
    }
  }
  return s;
}

}  // namespace xhc::scheduler
