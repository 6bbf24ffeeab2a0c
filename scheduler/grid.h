#ifndef XHC_SCHEDULER_GRID_H_
#define XHC_SCHEDULER_GRID_H_

// The rank x step grid printed by `xhc schedule --format text` and by validation errors.

#include <string>
#include <vector>

#include "scheduler/action.h"

namespace xhc::scheduler {

struct GridMark {
  int rank = -1;
  int step = -1;  // index into that rank's list
};

// One row per rank, one fixed-width column per step; marked cells read ">>0F3<<".
std::string RenderGrid(const std::vector<std::vector<Action>>& lists,
                       const std::vector<GridMark>& marks = {});

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_GRID_H_
