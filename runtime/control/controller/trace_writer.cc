#include "runtime/control/controller/trace_writer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "runtime/checkpoint/file_io.h"

namespace xhc::controller {

absl::Status WriteChromeTrace(const std::string& path, const std::vector<proto::Span>& spans,
                              const std::vector<int>& ranks, int num_ranks) {
  nlohmann::json events = nlohmann::json::array();
  double t0 = spans.empty() ? 0 : spans[0].start_us();
  for (const proto::Span& s : spans) t0 = std::min(t0, s.start_us());
  for (int r = 0; r < num_ranks; ++r) {
    events.push_back({{"ph", "M"},
                      {"name", "process_name"},
                      {"pid", r},
                      {"args", {{"name", absl::StrCat("rank ", r)}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", r},
                      {"tid", 0},
                      {"args", {{"name", "compute"}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", r},
                      {"tid", 1},
                      {"args", {{"name", "communication"}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", r},
                      {"tid", 2},
                      {"args", {{"name", "waiting on peers"}}}});
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", r},
                      {"tid", 3},
                      {"args", {{"name", "transfers (copy stream)"}}}});
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    const proto::Span& s = spans[i];
    nlohmann::json args = nlohmann::json::object();
    if (s.has_microbatch()) args["microbatch"] = s.microbatch();
    events.push_back({{"ph", "X"},
                      {"name", s.name()},
                      {"pid", ranks[i]},
                      {"tid", s.track()},
                      {"ts", s.start_us() - t0},
                      {"dur", s.dur_us()},
                      {"args", args},
                      {"cat", s.track() == 0   ? "compute"
                              : s.track() == 1 ? "comm"
                              : s.track() == 2 ? "peer"
                                               : "transfer"}});
  }
  nlohmann::json doc = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return WriteFileAtomic(path, doc.dump());
}

}  // namespace xhc::controller
