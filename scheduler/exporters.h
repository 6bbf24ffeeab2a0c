#ifndef XHC_SCHEDULER_EXPORTERS_H_
#define XHC_SCHEDULER_EXPORTERS_H_

// Pictures of a simulated schedule.
//  * Chrome trace JSON (chrome://tracing, Perfetto): one process per rank, thread 0 the
//    compute stream and thread 1 the communication stream, times in microseconds (one
//    simulator unit = 1 ms), a flow arrow from each SEND to the RECV it feeds.
//  * SVG timeline in the style of the DualPipe README: one row per rank, forward and
//    backward in different hues, the second direction (DualPipe's micro-batches entering at
//    the last rank, DualPipeV's way up the V) in a darker shade, an overlapped F&B drawn as
//    one outlined box split into its two halves, bubbles left blank.

#include <string>

#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace xhc::scheduler {

// 0 for the first direction, 1 for the second (see above); 0 for single-direction types.
int DirectionOf(const Schedule& schedule, int stage_idx, int microbatch_idx);

std::string ChromeTraceJson(const Schedule& schedule, const SimResult& result);
std::string SvgTimeline(const Schedule& schedule, const SimResult& result);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_EXPORTERS_H_
