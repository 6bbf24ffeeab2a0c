#ifndef XHC_SCHEDULER_VALIDATOR_H_
#define XHC_SCHEDULER_VALIDATOR_H_

// Checks that a schedule can run and computes what it costs in memory.
//
// Rules, each reported as kInvalidArgument (kFailedPrecondition for a deadlock) with the
// rank x step grid and the offending action marked:
//  * every action names a stage and micro-batch of the layout, on a rank that runs it;
//  * every (stage, micro-batch) has exactly one F, and either one B or one I and one W;
//  * in lowered lists, every SEND has the matching RECV on its peer and vice versa, and
//    every input from another rank is received (RECV posted) before it is consumed;
//  * dependency order: the lists run to completion (an untimed simulation), so no action
//    comes before what it needs on its own rank and no ranks wait on each other in a cycle.

#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/action.h"
#include "scheduler/schedule.h"

namespace xhc::scheduler {

struct ValidationReport {
  std::vector<int> peak_activations;  // per rank, see PeakActivations
};

// Validates `lists` (compute-only or lowered) against `layout`'s stage ownership.
absl::StatusOr<ValidationReport> ValidateLists(const Schedule& layout,
                                               const std::vector<std::vector<Action>>& lists);

// Validates a schedule's compute lists and its lowering.
absl::StatusOr<ValidationReport> Validate(const Schedule& schedule);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_VALIDATOR_H_
