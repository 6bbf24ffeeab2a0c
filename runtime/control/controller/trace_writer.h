#ifndef XHC_RUNTIME_CONTROL_CONTROLLER_TRACE_WRITER_H_
#define XHC_RUNTIME_CONTROL_CONTROLLER_TRACE_WRITER_H_

// Merges the spans every worker reported into one Chrome / Perfetto trace: one process per
// rank, a compute track (tid 0) and a communication track (tid 1).

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "proto/xhc.pb.h"

namespace xhc::controller {

absl::Status WriteChromeTrace(const std::string& path, const std::vector<proto::Span>& spans,
                              const std::vector<int>& ranks, int num_ranks);

}  // namespace xhc::controller

#endif  // XHC_RUNTIME_CONTROL_CONTROLLER_TRACE_WRITER_H_
