#ifndef XHC_SCHEDULER_SCHEDULE_CLI_H_
#define XHC_SCHEDULER_SCHEDULE_CLI_H_

// `xhc schedule`: build, validate, simulate and export a pipeline schedule.
//
//   xhc schedule --type TYPE --ranks R --microbatches M [--chunks V]
//                [--costs f=1,b=2,i=1,w=1,fb=3,overlap=0]
//                [--payload-bytes X --bandwidth-gbps Y --latency-us Z]
//                [--format text|torch-csv|chrome|svg|json] [--lowered] [--out FILE]
//   xhc schedule --validate-csv FILE [--costs ...]
//
// text: the rank x step grid and the statistics; json: the statistics (makespan, bubble
// per rank, exposed communication, peak activations, the analytic bubble where a formula
// exists); torch-csv: PyTorch's schedule CSV (compute actions; with --lowered, the lists
// with SEND/RECV/REDUCE_GRAD); chrome: Chrome trace JSON; svg: the timeline picture.
// Exit status: 0 ok, 1 invalid schedule or failed I/O, 2 bad command line.

#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/simulator.h"

namespace xhc::scheduler {

// What `--validate-csv` does to a file's text (untrusted: a CSV from anywhere): parse,
// recover stage ownership and peers, validate, simulate; the report it prints, or
// kInvalidArgument naming what is wrong.
absl::StatusOr<std::string> ValidateTorchCsvText(const std::string& text, const SimCosts& costs);

// `args` excludes the program name and "schedule".
int RunScheduleCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace xhc::scheduler

#endif  // XHC_SCHEDULER_SCHEDULE_CLI_H_
