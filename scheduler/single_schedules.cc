// GPipe, 1F1B, interleaved 1F1B (Megatron virtual pipeline) and ZB1P (zero-bubble H1).

#include <algorithm>
#include <deque>

#include "scheduler/schedule_builders.h"

namespace xhc::scheduler::internal {

RankActions BuildGPipe(int num_ranks, int num_microbatches) {
  RankActions out(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    // Phase 1: every forward; phase 2: every backward, in the same micro-batch order.
    for (int j = 0; j < num_microbatches; ++j) out[r].push_back(Action::F(r, j));
    for (int j = 0; j < num_microbatches; ++j) out[r].push_back(Action::B(r, j));
  }
  return out;
}

RankActions Build1F1B(int num_ranks, int num_microbatches) {
  RankActions out(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    auto& list = out[r];
    // Warm-up: enough forwards in flight that the first backward arrives just in time.
    const int num_warmup = std::min(num_ranks - 1 - r, num_microbatches);
    int next_f = 0, next_b = 0;
    for (int k = 0; k < num_warmup; ++k) list.push_back(Action::F(r, next_f++));
    // Steady state: one forward, one backward.
    while (next_f < num_microbatches) {
      list.push_back(Action::F(r, next_f++));
      list.push_back(Action::B(r, next_b++));
    }
    // Cool-down: the backwards of the warm-up forwards.
    while (next_b < num_microbatches) list.push_back(Action::B(r, next_b++));
  }
  return out;
}

namespace {

// Megatron's mapping of the k-th forward (or backward) of a rank to (chunk, micro-batch):
// groups of R micro-batches sweep through the chunks in turn; backwards sweep them in
// reverse chunk order.
Action InterleavedAction(int r, int k, int num_ranks, int num_chunks, bool forward) {
  const int group = num_ranks * num_chunks;
  int chunk = (k % group) / num_ranks;
  if (!forward) chunk = num_chunks - 1 - chunk;
  const int mb = (k / group) * num_ranks + k % num_ranks;
  const int stage = chunk * num_ranks + r;
  return forward ? Action::F(stage, mb) : Action::B(stage, mb);
}

}  // namespace

RankActions BuildInterleaved1F1B(int num_ranks, int num_microbatches, int num_chunks) {
  RankActions out(num_ranks);
  const int total = num_microbatches * num_chunks;
  for (int r = 0; r < num_ranks; ++r) {
    // Warm-up as in Megatron: two per downstream rank plus a full round of the other
    // chunks; with exactly R micro-batches everything is warm-up (all F, then all B).
    int num_warmup = (num_ranks - r - 1) * 2 + (num_chunks - 1) * num_ranks;
    if (num_microbatches == num_ranks) num_warmup = total;
    num_warmup = std::min(num_warmup, total);
    auto& list = out[r];
    for (int k = 0; k < num_warmup; ++k) {
      list.push_back(InterleavedAction(r, k, num_ranks, num_chunks, true));
    }
    // Steady state: one forward, one backward; then the cool-down backwards.
    for (int k = 0; k < total - num_warmup; ++k) {
      list.push_back(InterleavedAction(r, num_warmup + k, num_ranks, num_chunks, true));
      list.push_back(InterleavedAction(r, k, num_ranks, num_chunks, false));
    }
    for (int k = total - num_warmup; k < total; ++k) {
      list.push_back(InterleavedAction(r, k, num_ranks, num_chunks, false));
    }
  }
  return out;
}

RankActions BuildZB1P(int num_ranks, int num_microbatches) {
  RankActions out(num_ranks);
  for (int r = 0; r < num_ranks; ++r) {
    auto& list = out[r];
    std::deque<int> pending_w;
    int next_f = 0, next_i = 0;
    auto emit_i = [&] {
      list.push_back(Action::I(r, next_i));
      pending_w.push_back(next_i++);
    };
    auto emit_w = [&] {
      list.push_back(Action::W(r, pending_w.front()));
      pending_w.pop_front();
    };
    // Warm-up: as 1F1B, so at most R micro-batches are in flight on any rank.
    const int num_warmup = std::min(num_ranks - 1 - r, num_microbatches);
    for (int k = 0; k < num_warmup; ++k) list.push_back(Action::F(r, next_f++));
    // Steady state F, I, W: rank r holds its first r weight grads back. Deferring them
    // moves rank r's last input grads earlier, which the upstream ranks wait for; the held
    // W's fill the cool-down bubble instead (ZB-H1, so the bubble drops to (R-1)(F+I-W)).
    for (int k = 0; next_f < num_microbatches; ++k) {
      list.push_back(Action::F(r, next_f++));
      emit_i();
      if (k >= r) emit_w();
    }
    // Cool-down: each remaining input grad followed by one held weight grad.
    while (next_i < num_microbatches) {
      emit_i();
      emit_w();
    }
    // Drain: the weight grads still held.
    while (!pending_w.empty()) emit_w();
  }
  return out;
}

}  // namespace xhc::scheduler::internal
