// Fuzzes `xhc schedule --validate-csv` on a CSV's text: ReadTorchCsv, stage ownership, peers,
// validation and simulation. A CSV that reads must write back to text that reads the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "scheduler/schedule_cli.h"
#include "scheduler/torch_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto lists = xhc::scheduler::ReadTorchCsv(text);
  if (lists.ok()) {
    auto again = xhc::scheduler::ReadTorchCsv(xhc::scheduler::WriteTorchCsv(*lists));
    if (!again.ok() || *again != *lists) std::abort();
  }
  absl::StatusOr<std::string> report =
      xhc::scheduler::ValidateTorchCsvText(text, xhc::scheduler::SimCosts{});
  if (!report.ok() && report.status().message().empty()) std::abort();
  return 0;
}
