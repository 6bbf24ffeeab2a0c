// DualPipe and DualPipeV, written as the eight named phases of the DeepSeek-V3 report.
//
// Both schedules run the same per-rank program over two "phases" (model chunks) of the
// rank: phase 0 is the chunk at which this rank is early in its pipeline (position h), and
// phase 1 the chunk at which it is late. With n ranks per half-pipeline and h the rank's
// position in it:
//   DualPipe  (R ranks): n = R/2, h = min(r, R-1-r), M/2 micro-batches per phase;
//   DualPipeV (R ranks): n = R,   h = r,             M   micro-batches per phase.
// DualPipeV with R ranks is DualPipe with 2R ranks folded in half at the middle.

#include <algorithm>
#include <deque>
#include <utility>

#include "scheduler/schedule_builders.h"

namespace xhc::scheduler::internal {
namespace {

struct Phase {
  int stage_idx = 0;
  int first_mb = 0;  // micro-batches first_mb .. first_mb + count - 1
  int next_f = 0;    // forwards issued so far
  int next_b = 0;    // backwards issued so far
};

// Emits one rank's compute actions; backwards follow forwards in micro-batch order per
// phase, and deferred weight grads leave in the order their I's were issued.
class DualEmitter {
 public:
  DualEmitter(Phase phase0, Phase phase1) : phases_{phase0, phase1} {}

  void F(int p) { list_.push_back(NextF(p)); }
  // zero_bubble: split into I now and W later (queued); otherwise a full B.
  void B(int p, bool zero_bubble) {
    Action b = NextB(p);
    if (zero_bubble) {
      list_.push_back(Action::I(b.stage_idx, b.microbatch_idx));
      pending_w_.push_back(Action::W(b.stage_idx, b.microbatch_idx));
    } else {
      list_.push_back(b);
    }
  }
  void W() {
    list_.push_back(pending_w_.front());
    pending_w_.pop_front();
  }
  void FB(int fwd_p, int bwd_p) {
    Action f = NextF(fwd_p);
    list_.push_back(Action::FB(f, NextB(bwd_p)));
  }
  std::vector<Action> Take() { return std::move(list_); }

 private:
  Action NextF(int p) {
    Phase& ph = phases_[p];
    return Action::F(ph.stage_idx, ph.first_mb + ph.next_f++);
  }
  Action NextB(int p) {
    Phase& ph = phases_[p];
    return Action::B(ph.stage_idx, ph.first_mb + ph.next_b++);
  }

  Phase phases_[2];
  std::vector<Action> list_;
  std::deque<Action> pending_w_;
};

// The eight phases. n, h as above; num_mb = micro-batches per phase; middle: the rank at
// the turn of the pipeline (DualPipe's two middle ranks, DualPipeV's last rank).
std::vector<Action> EightPhases(DualEmitter e, int n, int h, int num_mb, bool middle) {
  // 1. Warm-up forwards of phase 0 (nF0): fill the pipeline from this end.
  for (int i = 0; i < (n - h - 1) * 2; ++i) e.F(0);
  // 2. Forward pairs (nF0F1): the other direction's micro-batches start arriving.
  for (int i = 0; i < h + 1; ++i) {
    e.F(0);
    e.F(1);
  }
  // 3. Zero-bubble I/W (nB1W1F1): first backwards of phase 1, weight grad done at once.
  for (int i = 0; i < n - h - 1; ++i) {
    e.B(1, /*zero_bubble=*/true);
    e.W();
    e.F(1);
  }
  // 4. Steady overlapped pairs (nF0B1F1B0). The middle rank runs its first F0 and B1
  //    back to back rather than overlapped, so F0's output leaves for the other half of
  //    the pipeline before B1 starts: that hand-over is on the critical path.
  for (int i = 0; i < num_mb - 2 * n + h + 1; ++i) {
    if (i == 0 && middle) {
      e.F(0);
      e.B(1, /*zero_bubble=*/false);
    } else {
      e.FB(0, 1);
    }
    e.FB(1, 0);
  }
  // 5. Cool-down (nB1F1B0): phase 1 has run out of forwards to overlap with B1.
  for (int i = 0; i < n - h - 1; ++i) {
    e.B(1, false);
    e.FB(1, 0);
  }
  // 6. Backward pairs (nB1B0); the second half switches to zero bubble so the W's can
  //    fill the drain.
  const int num_step6 = h + 1;
  bool zero_bubble = false;
  for (int i = 0; i < num_step6; ++i) {
    if (i == num_step6 / 2 && h % 2 == 1) zero_bubble = true;
    e.B(1, zero_bubble);
    if (i == num_step6 / 2 && h % 2 == 0) zero_bubble = true;
    e.B(0, zero_bubble);
  }
  // 7. Zero-bubble W/B0 (nWB0).
  for (int i = 0; i < n - h - 1; ++i) {
    e.W();
    e.B(0, true);
  }
  // 8. Drain the deferred weight grads (nW).
  for (int i = 0; i < h + 1; ++i) e.W();
  return e.Take();
}

}  // namespace

RankActions BuildDualPipe(int num_ranks, int num_microbatches) {
  RankActions out(num_ranks);
  const int n = num_ranks / 2, half_mb = num_microbatches / 2;
  for (int r = 0; r < num_ranks; ++r) {
    const int h = std::min(r, num_ranks - 1 - r);
    // Micro-batches [0, M/2) flow down from rank 0 (stage s on rank s); [M/2, M) flow up
    // from rank R-1 (stage s on rank R-1-s). Phase 0 is the direction entering nearest r.
    Phase down{r, 0}, up{num_ranks - 1 - r, half_mb};
    const bool second_half = r >= n;
    DualEmitter e = second_half ? DualEmitter(up, down) : DualEmitter(down, up);
    out[r] = EightPhases(std::move(e), n, h, half_mb, /*middle=*/h == n - 1);
  }
  return out;
}

RankActions BuildDualPipeV(int num_ranks, int num_microbatches) {
  RankActions out(num_ranks);
  const int num_stages = 2 * num_ranks;
  for (int r = 0; r < num_ranks; ++r) {
    // Phase 0 is the way down the V (stage r), phase 1 the way up (stage 2R-1-r).
    DualEmitter e(Phase{r, 0}, Phase{num_stages - 1 - r, 0});
    out[r] = EightPhases(std::move(e), num_ranks, r, num_microbatches,
                         /*middle=*/r == num_ranks - 1);
  }
  return out;
}

}  // namespace xhc::scheduler::internal
