#include "scheduler/grid.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace xhc::scheduler {

std::string RenderGrid(const std::vector<std::vector<Action>>& lists,
                       const std::vector<GridMark>& marks) {
  auto marked = [&](int r, int k) {
    return std::any_of(marks.begin(), marks.end(),
                       [&](const GridMark& m) { return m.rank == r && m.step == k; });
  };
  std::vector<std::vector<std::string>> cells(lists.size());
  size_t width = 1;
  for (size_t r = 0; r < lists.size(); ++r) {
    for (size_t k = 0; k < lists[r].size(); ++k) {
      std::string cell = ToString(lists[r][k]);
      if (marked(static_cast<int>(r), static_cast<int>(k))) cell = absl::StrCat(">>", cell, "<<");
      width = std::max(width, cell.size());
      cells[r].push_back(std::move(cell));
    }
  }
  std::string out;
  for (size_t r = 0; r < cells.size(); ++r) {
    absl::StrAppend(&out, "rank ", r, ":");
    for (const std::string& cell : cells[r]) {
      absl::StrAppend(&out, " ", cell, std::string(width - cell.size(), ' '));
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace xhc::scheduler
