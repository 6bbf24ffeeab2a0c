#ifndef XHC_SCHEDULER_SCHEDULE_H_
#define XHC_SCHEDULER_SCHEDULE_H_

// Pipeline schedules as data: a pure, deterministic function of the request.
//
// Stage layout per type (num_stages = S, ranks = R, micro-batches = M):
//   gpipe, 1f1b, zb1p   S = R, rank r holds stage r.
//   interleaved1f1b     S = R*V (V = num_chunks), rank r holds stages r, r+R, ..., r+(V-1)R
//                       (Megatron's virtual pipeline); requires M % R == 0.
//   dualpipe            R even, S = R; rank r holds stage r and its mirror R-1-r, i.e. two
//                       replicas of every stage exist. Micro-batches [0, M/2) enter at rank 0
//                       and run stages 0..S-1 on ranks 0..R-1; micro-batches [M/2, M) enter at
//                       rank R-1 and run stages 0..S-1 on ranks R-1..0. The replicas' weight
//                       gradients are summed by REDUCE_GRAD. Requires M even and M >= 2R.
//   dualpipev           S = 2R in a V: rank r holds stages r and 2R-1-r; every micro-batch
//                       enters at rank 0 and the loss (stage 2R-1) is on rank 0; the hand-over
//                       from stage R-1 to R stays on rank R-1. Requires M >= 2R.
//   zbv                 the layout of dualpipev (S = 2R in a V, loss on rank 0); any M >= 1.
//   interleaved_zb      the layout of interleaved1f1b; PyTorch's flexible rounds: requires
//                       M % max(1, M / R) == 0.
//   looped_bfs          the layout of interleaved1f1b; any M >= 1.
// The loss is computed by the last stage S-1 on LossRanks() (two ranks for dualpipe).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/action.h"

namespace xhc::scheduler {

struct ScheduleRequest {
  // gpipe | 1f1b | interleaved1f1b | zb1p | dualpipe | dualpipev | zbv | interleaved_zb |
  // looped_bfs
  std::string type;
  int num_ranks = 1;
  int num_microbatches = 1;
  int num_chunks = 1;  // stages per rank; only the looped types take more than 1
};

// The canonical spelling of a schedule type ("interleaved-1f1b" -> "interleaved1f1b"), or
// kInvalidArgument listing the known types.
absl::StatusOr<std::string> CanonicalType(const std::string& type);

// The fewest micro-batches `type` (canonical) runs on `num_ranks` ranks: 2R for dualpipe and
// dualpipev (their phases need both directions in flight), 1 otherwise. Other restrictions
// (divisibility, even counts) are reported by BuildSchedule.
int MinMicrobatches(const std::string& type, int num_ranks);

struct Schedule {
  std::string type;
  int num_ranks = 0;
  int num_microbatches = 0;
  int num_chunks = 1;
  int num_stages = 0;
  // rank_stages[r]: the stages rank r holds, ascending.
  std::vector<std::vector<int>> rank_stages;
  // stage_mb_rank[s][j]: the rank that runs stage s for micro-batch j. One rank per stage
  // except for dualpipe, where the micro-batch's entry end picks the replica.
  std::vector<std::vector<int>> stage_mb_rank;
  // rank_actions[r]: rank r's compute actions (F/B/I/W/FB) in execution order.
  std::vector<std::vector<Action>> rank_actions;

  int RankOf(int stage_idx, int microbatch_idx) const {
    return stage_mb_rank[stage_idx][microbatch_idx];
  }
  // Every rank holding a replica of stage_idx, ascending.
  std::vector<int> StageToRanks(int stage_idx) const;
  int loss_stage() const { return num_stages - 1; }
  // Ranks that compute the loss: {R-1} normally, {0} for dualpipev and zbv, {R-1, 0} for
  // dualpipe.
  std::vector<int> LossRanks() const;
  // The rank at which micro-batch j's first stage runs (dualpipe: 0 or R-1; otherwise 0).
  int EntryRank(int microbatch_idx) const { return RankOf(0, microbatch_idx); }

  // Per-rank lists with communication inserted, which is what a worker executes:
  //  * after a compute action, a SEND_F / SEND_B for each output whose consumer runs on
  //    another rank (outputs consumed on the same rank, e.g. dualpipev's bottom of the V,
  //    need no message);
  //  * each RECV_F / RECV_B is posted one compute action ahead of its consumer (before
  //    the preceding compute action, or at the start), so the transfer overlaps that
  //    compute while at most one extra receive buffer per direction is held;
  //  * for dualpipe, a REDUCE_GRAD per held stage, peer = the other replica, right after
  //    the rank's last action that adds to the stage's weight gradients (its last B, W or
  //    F&B backward half, and that action's sends), so the exchange overlaps the rank's
  //    remaining compute.
  // Receives are non-blocking posts; the consuming compute action waits for them. Sends
  // are non-blocking; buffers may be reused once the send completes. REDUCE_GRAD is a
  // non-blocking post too, completed before the optimizer; the two replicas may post their
  // stages' REDUCE_GRADs in different orders.
  std::vector<std::vector<Action>> Lower() const;
};

// Builds the schedule, or kInvalidArgument naming what is wrong with the request.
absl::StatusOr<Schedule> BuildSchedule(const ScheduleRequest& request);

// Rebuilds the layout from foreign per-rank action lists (e.g. a PyTorch CSV): the rank
// running F of (s, j) owns (s, j); stages/micro-batches are counted from the actions. The
// result's rank_actions keep only the compute actions; type is "custom". kInvalidArgument when
// the indices need more (stage, micro-batch) pairs than there are forwards (a bound on the
// memory a hostile CSV can make it allocate).
absl::StatusOr<Schedule> ScheduleFromActions(const std::vector<std::vector<Action>>& lists);

// Lower() for arbitrary compute lists over `layout`'s stage ownership.
std::vector<std::vector<Action>> LowerActions(const Schedule& layout,
                                              const std::vector<std::vector<Action>>& compute);

// Fills peer_rank of every communication action from the schedule's layout.
absl::Status FillPeers(const Schedule& schedule, std::vector<std::vector<Action>>& lists);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_SCHEDULE_H_
