#include "scheduler/torch_csv.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace xhc::scheduler {

std::string WriteTorchCsv(const std::vector<std::vector<Action>>& lists) {
  std::string out;
  for (const auto& list : lists) {
    for (size_t k = 0; k < list.size(); ++k) {
      absl::StrAppend(&out, k == 0 ? "" : ",", ToString(list[k]));
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<Action>>> ReadTorchCsv(const std::string& text) {
  std::vector<std::vector<Action>> lists;
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // A trailing newline ends the last row rather than starting an empty one.
  while (!lines.empty() && absl::StripAsciiWhitespace(lines.back()).empty()) lines.pop_back();
  for (size_t row = 0; row < lines.size(); ++row) {
    std::vector<Action>& list = lists.emplace_back();
    std::vector<absl::string_view> cells = absl::StrSplit(lines[row], ',');
    for (size_t col = 0; col < cells.size(); ++col) {
      absl::string_view cell = absl::StripAsciiWhitespace(cells[col]);
      if (cell.empty()) continue;
      absl::StatusOr<Action> action = ParseAction(cell);
      if (!action.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("csv row ", row, " (rank ", row, ") cell ",
                                                       col, ": ", action.status().message()));
      }
      list.push_back(*action);
    }
    // A rank without actions would be written back as an empty line, which reads as the end
    // of the file: such a CSV cannot round-trip, and no schedule has an idle rank (found by
    // torch_csv_fuzzer: "," read as one rank, its written form as none).
    if (list.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("csv row ", row, " (rank ", row, ") has no actions"));
    }
  }
  if (lists.empty()) return absl::InvalidArgumentError("csv has no rows");
  return lists;
}

}  // namespace xhc::scheduler
