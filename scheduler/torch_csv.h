#ifndef XHC_SCHEDULER_TORCH_CSV_H_
#define XHC_SCHEDULER_TORCH_CSV_H_

// PyTorch pipelining's schedule CSV (torch.distributed.pipelining, torchtitan): one row per
// rank, in rank order, one action token per cell ("0F0", "7I0", "7W0", "3SEND_F1",
// "(0F7;7B3)OVERLAP_F_B"), no header. Empty cells are ignored on read. peer_rank is not
// stored; ScheduleFromActions + FillPeers recover it from stage ownership.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/action.h"

namespace xhc::scheduler {

std::string WriteTorchCsv(const std::vector<std::vector<Action>>& lists);

// kInvalidArgument naming the row and cell of the first bad token, or the first row (before
// any trailing blank lines) without an action.
absl::StatusOr<std::vector<std::vector<Action>>> ReadTorchCsv(const std::string& text);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_TORCH_CSV_H_
