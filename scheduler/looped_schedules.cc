// Schedules over the looped placement (rank r holds stages r, r+R, ..., r+(V-1)R, as in
// interleaved1f1b): interleaved zero bubble and looped BFS, written as named phases.

#include <algorithm>
#include <deque>

#include "scheduler/schedule_builders.h"

namespace xhc::scheduler::internal {
namespace {

// Micro-batches per round for interleaved zero bubble: PyTorch's flexible rounds,
// max(1, M / R) rounds of M / rounds micro-batches (the request check makes it divide).
int MicrobatchesPerRound(int num_ranks, int num_microbatches) {
  return num_microbatches / std::max(1, num_microbatches / num_ranks);
}

// Emits one rank's interleaved-ZB program: the k-th forward (or input gradient) of the
// rank goes to the chunk of its round, forwards sweeping chunks up and backwards down;
// micro-batches per stage in order; W's leave in the order of their I's.
class LoopedEmitter {
 public:
  LoopedEmitter(int rank, int num_ranks, int num_chunks, int per_round)
      : rank_(rank),
        num_ranks_(num_ranks),
        num_chunks_(num_chunks),
        per_round_(per_round),
        next_mb_f_(num_chunks, 0),
        next_mb_i_(num_chunks, 0) {}

  void F() {
    const int chunk = (num_f_++ / per_round_) % num_chunks_;
    list_.push_back(Action::F(Stage(chunk), next_mb_f_[chunk]++));
  }
  void I() {
    const int chunk = num_chunks_ - 1 - (num_i_++ / per_round_) % num_chunks_;
    const Action i = Action::I(Stage(chunk), next_mb_i_[chunk]++);
    list_.push_back(i);
    pending_w_.push_back(Action::W(i.stage_idx, i.microbatch_idx));
  }
  void W() {
    list_.push_back(pending_w_.front());
    pending_w_.pop_front();
  }
  int num_i() const { return num_i_; }
  bool HasPendingW() const { return !pending_w_.empty(); }
  std::vector<Action> Take() { return std::move(list_); }

 private:
  int Stage(int chunk) const { return chunk * num_ranks_ + rank_; }

  int rank_, num_ranks_, num_chunks_, per_round_;
  int num_f_ = 0, num_i_ = 0;
  std::vector<int> next_mb_f_, next_mb_i_;
  std::deque<Action> pending_w_;
  std::vector<Action> list_;
};

}  // namespace

RankActions BuildInterleavedZB(int num_ranks, int num_microbatches, int num_chunks) {
  RankActions out(num_ranks);
  const int per_round = MicrobatchesPerRound(num_ranks, num_microbatches);
  const int total = num_microbatches * num_chunks;  // forwards (and I's, and W's) per rank
  for (int r = 0; r < num_ranks; ++r) {
    LoopedEmitter e(r, num_ranks, num_chunks, per_round);
    // 1. Warm-up forwards: a round of every chunk but the last, plus one per downstream
    //    rank (1F1B's count; interleaved1f1b takes two per hop, zero bubble needs one as
    //    the deferred W's absorb the wait).
    const int num_warmup = std::min((num_chunks - 1) * per_round + num_ranks - 1 - r, total);
    for (int k = 0; k < num_warmup; ++k) e.F();
    // 2. Steady F, I (+ W): rank r holds its first r weight gradients back (ZB-H1), so its
    //    input gradients reach the upstream ranks earlier.
    auto w_if_released = [&] {
      if (e.num_i() > r) e.W();
    };
    for (int k = num_warmup; k < total; ++k) {
      e.F();
      e.I();
      w_if_released();
    }
    // 3. Cool-down: the remaining input gradients, each followed by a W once released.
    while (e.num_i() < total) {
      e.I();
      w_if_released();
    }
    // 4. Drain the held weight gradients.
    while (e.HasPendingW()) e.W();
    out[r] = e.Take();
  }
  return out;
}

RankActions BuildLoopedBFS(int num_ranks, int num_microbatches, int num_chunks) {
  RankActions out(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    auto& list = out[r];
    // 1. Breadth-first forwards: every micro-batch through one held stage before the next.
    for (int c = 0; c < num_chunks; ++c) {
      for (int j = 0; j < num_microbatches; ++j) list.push_back(Action::F(c * num_ranks + r, j));
    }
    // 2. Backwards, last held stage first, newest micro-batch first: the last stage's most
    //    recent forward can turn around at once.
    for (int c = num_chunks - 1; c >= 0; --c) {
      for (int j = num_microbatches - 1; j >= 0; --j) {
        list.push_back(Action::B(c * num_ranks + r, j));
      }
    }
  }
  return out;
}

}  // namespace xhc::scheduler::internal
