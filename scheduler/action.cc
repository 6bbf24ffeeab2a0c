#include "scheduler/action.h"

#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace xhc::scheduler {
namespace {

constexpr std::array<std::pair<ActionType, absl::string_view>, 10> kNames = {{
    {ActionType::kForward, "F"},
    {ActionType::kBackward, "B"},
    {ActionType::kBackwardInput, "I"},
    {ActionType::kBackwardWeight, "W"},
    {ActionType::kOverlapFB, "OVERLAP_F_B"},
    {ActionType::kSendF, "SEND_F"},
    {ActionType::kRecvF, "RECV_F"},
    {ActionType::kSendB, "SEND_B"},
    {ActionType::kRecvB, "RECV_B"},
    {ActionType::kReduceGrad, "REDUCE_GRAD"},
}};

absl::string_view NameOf(ActionType type) {
  for (const auto& [t, name] : kNames) {
    if (t == type) return name;
  }
  return "?";
}

absl::StatusOr<Action> ParseSimple(absl::string_view token) {
  size_t pos = 0;
  while (pos < token.size() && absl::ascii_isdigit(token[pos])) ++pos;
  int stage_idx = 0;
  if (pos == 0 || !absl::SimpleAtoi(token.substr(0, pos), &stage_idx)) {
    return absl::InvalidArgumentError(absl::StrCat("action '", token, "' lacks a stage index"));
  }
  size_t end = pos;
  while (end < token.size() && !absl::ascii_isdigit(token[end])) ++end;
  absl::string_view name = token.substr(pos, end - pos);
  absl::string_view mb_text = token.substr(end);
  for (const auto& [type, known] : kNames) {
    if (known != name || type == ActionType::kOverlapFB) continue;
    Action action;
    action.type = type;
    action.stage_idx = stage_idx;
    if (type == ActionType::kReduceGrad && mb_text.empty()) return action;
    if (mb_text.empty() || !absl::SimpleAtoi(mb_text, &action.microbatch_idx)) {
      return absl::InvalidArgumentError(
          absl::StrCat("action '", token, "' lacks a micro-batch index"));
    }
    return action;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown action type in '", token, "'"));
}

}  // namespace

Action Action::F(int s, int j) { return Action{ActionType::kForward, s, j}; }
Action Action::B(int s, int j) { return Action{ActionType::kBackward, s, j}; }
Action Action::I(int s, int j) { return Action{ActionType::kBackwardInput, s, j}; }
Action Action::W(int s, int j) { return Action{ActionType::kBackwardWeight, s, j}; }

Action Action::FB(const Action& fwd, const Action& bwd) {
  Action a{ActionType::kOverlapFB, fwd.stage_idx, fwd.microbatch_idx};
  a.bwd_stage_idx = bwd.stage_idx;
  a.bwd_microbatch_idx = bwd.microbatch_idx;
  return a;
}

Action Action::Comm(ActionType type, int s, int j, int peer_rank) {
  Action a{type, s, j};
  a.peer_rank = peer_rank;
  return a;
}

bool Action::IsCompute() const {
  switch (type) {
    case ActionType::kForward:
    case ActionType::kBackward:
    case ActionType::kBackwardInput:
    case ActionType::kBackwardWeight:
    case ActionType::kOverlapFB: return true;
    default: return false;
  }
}

Action Action::ForwardHalf() const { return F(stage_idx, microbatch_idx); }
Action Action::BackwardHalf() const { return B(bwd_stage_idx, bwd_microbatch_idx); }

int Action::WeightGradStage() const {
  switch (type) {
    case ActionType::kBackward:
    case ActionType::kBackwardWeight: return stage_idx;
    case ActionType::kOverlapFB: return bwd_stage_idx;
    default: return -1;
  }
}

std::string ToString(const Action& a) {
  if (a.type == ActionType::kOverlapFB) {
    return absl::StrCat("(", ToString(a.ForwardHalf()), ";", ToString(a.BackwardHalf()),
                        ")OVERLAP_F_B");
  }
  if (a.type == ActionType::kReduceGrad && a.microbatch_idx < 0) {
    return absl::StrCat(a.stage_idx, NameOf(a.type));
  }
  return absl::StrCat(a.stage_idx, NameOf(a.type), a.microbatch_idx);
}

absl::StatusOr<Action> ParseAction(absl::string_view token) {
  token = absl::StripAsciiWhitespace(token);
  if (!absl::ConsumePrefix(&token, "(")) return ParseSimple(token);
  if (!absl::ConsumeSuffix(&token, ")OVERLAP_F_B")) {
    return absl::InvalidArgumentError(absl::StrCat("bad overlapped action '(", token, "'"));
  }
  std::vector<absl::string_view> halves = absl::StrSplit(token, ';');
  if (halves.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("overlapped action '", token, "' must pair exactly two actions"));
  }
  absl::StatusOr<Action> fwd = ParseSimple(halves[0]);
  absl::StatusOr<Action> bwd = ParseSimple(halves[1]);
  if (!fwd.ok()) return fwd.status();
  if (!bwd.ok()) return bwd.status();
  // The runtime overlaps a forward with a full backward only (DualPipe's F&B).
  if (fwd->type != ActionType::kForward || bwd->type != ActionType::kBackward) {
    return absl::InvalidArgumentError(
        absl::StrCat("overlapped action '", token, "' must be (F;B)"));
  }
  return Action::FB(*fwd, *bwd);
}

}  // namespace xhc::scheduler
