#ifndef XHC_SCHEDULER_SCHEDULE_BUILDERS_H_
#define XHC_SCHEDULER_SCHEDULE_BUILDERS_H_

// Internal: the per-type generators behind BuildSchedule. Each returns rank_actions for an
// already validated request; the layout (stage ownership) is set up by schedule.cc.

#include <vector>

#include "scheduler/action.h"

namespace xhc::scheduler::internal {

using RankActions = std::vector<std::vector<Action>>;

RankActions BuildGPipe(int num_ranks, int num_microbatches);
RankActions Build1F1B(int num_ranks, int num_microbatches);
RankActions BuildInterleaved1F1B(int num_ranks, int num_microbatches, int num_chunks);
RankActions BuildZB1P(int num_ranks, int num_microbatches);
RankActions BuildDualPipe(int num_ranks, int num_microbatches);
RankActions BuildDualPipeV(int num_ranks, int num_microbatches);
RankActions BuildZBV(int num_ranks, int num_microbatches);
RankActions BuildInterleavedZB(int num_ranks, int num_microbatches, int num_chunks);
RankActions BuildLoopedBFS(int num_ranks, int num_microbatches, int num_chunks);

}  // namespace xhc::scheduler::internal

#endif  // XHC_SCHEDULER_SCHEDULE_BUILDERS_H_
