#ifndef XHC_SCHEDULER_ACTION_H_
#define XHC_SCHEDULER_ACTION_H_

// The schedule IR: one Action is one thing a pipeline rank does, in order.
//
// Compute actions (what BuildSchedule emits):
//   F   forward of (stage_idx, microbatch_idx)
//   B   full backward (input grad + weight grad together)
//   I   backward for inputs only; its weight grad is deferred to a later W
//   W   the deferred weight gradient of an earlier I
//   FB  an overlapped pair: the forward (stage_idx, microbatch_idx) and the full backward
//       (bwd_stage_idx, bwd_microbatch_idx) issued together so that one's compute and
//       communication hide the other's (DualPipe's F&B).
// Communication actions (what Schedule::Lower inserts), following PyTorch's convention:
//   SEND_F  stage_idx = the sending stage, RECV_F stage_idx = the receiving stage;
//   SEND_B  stage_idx = the sending stage, RECV_B stage_idx = the receiving stage;
//   REDUCE_GRAD  sum stage_idx's weight gradients with the other rank holding a replica
//       (DualPipe's mirrored stages); microbatch_idx is -1.
// peer_rank names the other end of a SEND/RECV/REDUCE_GRAD and is -1 for compute actions.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace xhc::scheduler {

enum class ActionType {
  kForward,
  kBackward,
  kBackwardInput,
  kBackwardWeight,
  kOverlapFB,
  kSendF,
  kRecvF,
  kSendB,
  kRecvB,
  kReduceGrad,
};

struct Action {
  ActionType type = ActionType::kForward;
  int stage_idx = -1;
  int microbatch_idx = -1;
  // Only for kOverlapFB: the backward half.
  int bwd_stage_idx = -1;
  int bwd_microbatch_idx = -1;
  // Only for communication actions.
  int peer_rank = -1;

  static Action F(int stage_idx, int microbatch_idx);
  static Action B(int stage_idx, int microbatch_idx);
  static Action I(int stage_idx, int microbatch_idx);
  static Action W(int stage_idx, int microbatch_idx);
  static Action FB(const Action& fwd, const Action& bwd);
  static Action Comm(ActionType type, int stage_idx, int microbatch_idx, int peer_rank);

  bool IsCompute() const;
  bool IsComm() const { return !IsCompute(); }
  // The forward / backward halves of an FB pair as stand-alone F and B actions.
  Action ForwardHalf() const;
  Action BackwardHalf() const;
  // The stage whose weight gradients this action adds to (a B, a W, or the backward half of
  // an overlapped F&B), else -1.
  int WeightGradStage() const;

  bool operator==(const Action& other) const = default;
};

// PyTorch pipelining's action token: "0F3", "7I0", "7W0", "3SEND_F1", "2REDUCE_GRAD",
// "(0F7;7B3)OVERLAP_F_B". peer_rank is not part of the token.
std::string ToString(const Action& action);

// Parses a token written by ToString (or by PyTorch). peer_rank comes back as -1.
absl::StatusOr<Action> ParseAction(absl::string_view token);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_ACTION_H_
