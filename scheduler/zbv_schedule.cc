// ZB-V (zero-bubble paper, arXiv 2401.10241 section 6), written as named phases.
//
// Rank r holds two chunks in a V: chunk 0 = stage r on the way down, chunk 1 = stage
// 2R-1-r on the way up, so every micro-batch enters and leaves at rank 0 (the layout of
// dualpipev). Backwards are split into I and W; with F = I = W per chunk the W's fill every
// gap, and at most 2R chunk activations (R stages' worth, as in 1F1B) are held on rank 0.
//
// The phase counts assume at least 2R-1 micro-batches. With fewer, the program is written
// for 2R-1 and the actions of the micro-batches that do not exist are dropped, which keeps
// every remaining action in a dependency-consistent order (only waits are added).

#include <algorithm>
#include <deque>

#include "scheduler/schedule_builders.h"

namespace xhc::scheduler::internal {
namespace {

// One rank's program over its two chunks; counters per chunk, W's in the order of their I's
// per chunk.
class VEmitter {
 public:
  VEmitter(int down_stage, int up_stage, int num_microbatches)
      : stage_{down_stage, up_stage}, num_microbatches_(num_microbatches) {}

  void F(int c) { Emit(Action::F(stage_[c], next_f_[c]++)); }
  void I(int c) { Emit(Action::I(stage_[c], next_i_[c]++)); }
  void W(int c) { Emit(Action::W(stage_[c], next_w_[c]++)); }
  void IW(int c) {
    I(c);
    W(c);
  }
  int forwards(int c) const { return next_f_[c]; }
  bool HasPendingW(int c) const { return next_w_[c] < next_i_[c]; }
  std::vector<Action> Take() { return std::move(list_); }

 private:
  void Emit(const Action& a) {
    if (a.microbatch_idx < num_microbatches_) list_.push_back(a);
  }

  int stage_[2];
  int next_f_[2] = {0, 0}, next_i_[2] = {0, 0}, next_w_[2] = {0, 0};
  int num_microbatches_;
  std::vector<Action> list_;
};

std::vector<Action> ZbvRank(int num_ranks, int r, int num_microbatches) {
  const int R = num_ranks;
  // Padded so the phase counts below hold; the extra micro-batches are never emitted.
  const int n = std::max(2 * R - 1, num_microbatches);
  VEmitter e(r, 2 * R - 1 - r, num_microbatches);
  // 1. nF0: fill the way down; farther from the bottom of the V, more forwards in flight.
  for (int k = 0; k < 2 * (R - r) - 1; ++k) e.F(0);
  // 2. nF1F0: the first micro-batches come back up through chunk 1 while chunk 0 fills.
  for (int k = 0; k < r; ++k) {
    e.F(1);
    e.F(0);
  }
  // 3. nF1I1W1: chunk 1's first backwards, each weight gradient at once (nothing waits).
  for (int k = 0; k < R - r; ++k) {
    e.F(1);
    e.IW(1);
  }
  // 4. Steady state: F0 I0 W0 F1 I1 W1 until both chunks have run every forward.
  while (e.forwards(1) < e.forwards(0) || e.forwards(0) < n) {
    if (e.forwards(0) < n) e.F(0);
    e.IW(0);
    e.F(1);
    e.IW(1);
  }
  // 5. nI0I1: input gradients first (upstream ranks wait on them); W's deferred.
  for (int k = 0; k < r; ++k) {
    e.I(0);
    e.I(1);
  }
  // 6. nI0W0: the last chunk-0 input grads, each followed by the oldest deferred chunk-0 W.
  for (int k = 0; k < R - r; ++k) {
    e.I(0);
    e.W(0);
  }
  // 7. Drain the deferred weight gradients, chunk 1 first.
  while (e.HasPendingW(1)) e.W(1);
  while (e.HasPendingW(0)) e.W(0);
  return e.Take();
}

}  // namespace

RankActions BuildZBV(int num_ranks, int num_microbatches) {
  RankActions out(num_ranks);
  for (int r = 0; r < num_ranks; ++r) out[r] = ZbvRank(num_ranks, r, num_microbatches);
  return out;
}

}  // namespace xhc::scheduler::internal
