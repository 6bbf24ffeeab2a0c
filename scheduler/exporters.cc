#include "scheduler/exporters.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xhc::scheduler {
namespace {

constexpr double kUsPerUnit = 1000.0;

const char* Category(const Action& a) {
  switch (a.type) {
    case ActionType::kForward: return "forward";
    case ActionType::kBackward: return "backward";
    case ActionType::kBackwardInput: return "backward_input";
    case ActionType::kBackwardWeight: return "backward_weight";
    case ActionType::kOverlapFB: return "overlap_f_b";
    default: return "comm";
  }
}

nlohmann::json Meta(int pid, int tid, const char* what, const std::string& name) {
  nlohmann::json m = {{"ph", "M"}, {"pid", pid}, {"name", what}, {"args", {{"name", name}}}};
  if (tid >= 0) m["tid"] = tid;
  return m;
}

// Flow ids: one per message, keyed by (backward, receiving stage, micro-batch).
using FlowKey = std::tuple<bool, int, int>;

FlowKey FlowOf(const Action& a) {
  const bool bwd = a.type == ActionType::kSendB || a.type == ActionType::kRecvB;
  const bool send = a.type == ActionType::kSendF || a.type == ActionType::kSendB;
  return {bwd, a.stage_idx + (send ? (bwd ? -1 : 1) : 0), a.microbatch_idx};
}

}  // namespace

int DirectionOf(const Schedule& s, int stage_idx, int mb) {
  if (s.type == "dualpipe") return mb >= s.num_microbatches / 2 ? 1 : 0;
  if (s.type == "dualpipev" || s.type == "zbv") return stage_idx >= s.num_ranks ? 1 : 0;
  return 0;
}

std::string ChromeTraceJson(const Schedule& s, const SimResult& result) {
  nlohmann::json events = nlohmann::json::array();
  std::map<FlowKey, int> flow_ids;
  for (int r = 0; r < static_cast<int>(result.timeline.size()); ++r) {
    events.push_back(Meta(r, -1, "process_name", absl::StrCat("rank ", r)));
    events.push_back(Meta(r, 0, "thread_name", "compute"));
    events.push_back(Meta(r, 1, "thread_name", "comm: send / reduce"));
    events.push_back(Meta(r, 2, "thread_name", "comm: receive completes"));
    for (const TimedAction& t : result.timeline[r]) {
      const ActionType type = t.action.type;
      const bool send = type == ActionType::kSendF || type == ActionType::kSendB;
      const bool recv = type == ActionType::kRecvF || type == ActionType::kRecvB;
      // Receives are drawn as the instant their data lands: posted receives overlap each
      // other, and overlapping slices on one track do not nest in trace viewers.
      const int tid = recv ? 2 : (t.on_comm_stream ? 1 : 0);
      const double ts = (recv ? t.end : t.start) * kUsPerUnit;
      const double dur = recv ? 0.0 : (t.end - t.start) * kUsPerUnit;
      nlohmann::json ev = {{"ph", "X"},
                           {"pid", r},
                           {"tid", tid},
                           {"name", ToString(t.action)},
                           {"cat", Category(t.action)},
                           {"ts", ts},
                           {"dur", dur}};
      if (t.action.peer_rank >= 0) ev["args"] = {{"peer_rank", t.action.peer_rank}};
      if (recv) ev["args"]["posted_at_us"] = t.start * kUsPerUnit;
      events.push_back(ev);
      if (!send && !recv) continue;
      auto [it, fresh] = flow_ids.emplace(FlowOf(t.action), static_cast<int>(flow_ids.size()));
      // The arrow leaves as the send starts and lands when the receive completes.
      nlohmann::json flow = {{"ph", send ? "s" : "f"},    {"pid", r},      {"tid", tid},
                             {"id", it->second},          {"name", "p2p"}, {"cat", "p2p"},
                             {"ts", send ? ts : ts + dur}};
      if (recv) flow["bp"] = "e";
      events.push_back(flow);
    }
  }
  nlohmann::json doc = {{"traceEvents", events},
                        {"displayTimeUnit", "ms"},
                        {"otherData",
                         {{"schedule", s.type},
                          {"ranks", s.num_ranks},
                          {"microbatches", s.num_microbatches},
                          {"makespan_ms", result.makespan}}}};
  return doc.dump();
}

namespace {

// Fill colours: [type][direction]; forward orange, backward blue, I teal, W green.
std::string Fill(const Action& a, int direction) {
  switch (a.type) {
    case ActionType::kForward: return direction ? "#e8892b" : "#fcd9a8";
    case ActionType::kBackward: return direction ? "#3a78c2" : "#acd0f2";
    case ActionType::kBackwardInput: return direction ? "#1f9a8a" : "#a4e0d6";
    default: return direction ? "#4f9a3a" : "#c4e6b4";
  }
}

std::string Box(double x, double y, double w, double h, const std::string& fill,
                const std::string& label) {
  return absl::StrFormat(
      "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\" "
      "stroke=\"#555\" stroke-width=\"0.5\"/><text x=\"%.2f\" y=\"%.2f\" font-size=\"9\" "
      "text-anchor=\"middle\">%s</text>\n",
      x, y, w, h, fill, x + w / 2, y + h / 2 + 3, label);
}

}  // namespace

std::string SvgTimeline(const Schedule& s, const SimResult& result) {
  constexpr double kRow = 28, kLeft = 60, kTop = 10;
  const double scale = result.makespan > 0 ? std::min(40.0, 1600.0 / result.makespan) : 1.0;
  const double width = kLeft + result.makespan * scale + 10;
  const double height = kTop + kRow * s.num_ranks + 10;
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "font-family=\"sans-serif\">\n",
      width, height);
  for (int r = 0; r < static_cast<int>(result.timeline.size()); ++r) {
    const double y = kTop + r * kRow;
    absl::StrAppend(&svg,
                    absl::StrFormat("<text x=\"4\" y=\"%.2f\" font-size=\"11\">rank %d</text>\n",
                                    y + kRow / 2, r));
    for (const TimedAction& t : result.timeline[r]) {
      if (t.on_comm_stream) continue;
      const Action& a = t.action;
      const double x = kLeft + t.start * scale, w = (t.end - t.start) * scale, h = kRow - 4;
      if (a.type != ActionType::kOverlapFB) {
        const int dir = DirectionOf(s, a.stage_idx, a.microbatch_idx);
        absl::StrAppend(&svg, Box(x, y, w, h, Fill(a, dir), absl::StrCat(a.microbatch_idx)));
        continue;
      }
      // Overlapped pair: the forward on top, the backward below, one thick outline.
      const Action f = a.ForwardHalf(), b = a.BackwardHalf();
      absl::StrAppend(&svg,
                      Box(x, y, w, h / 2, Fill(f, DirectionOf(s, f.stage_idx, f.microbatch_idx)),
                          absl::StrCat(f.microbatch_idx)));
      absl::StrAppend(
          &svg, Box(x, y + h / 2, w, h / 2, Fill(b, DirectionOf(s, b.stage_idx, b.microbatch_idx)),
                    absl::StrCat(b.microbatch_idx)));
      absl::StrAppend(&svg, absl::StrFormat("<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" "
                                            "height=\"%.2f\" fill=\"none\" stroke=\"#000\" "
                                            "stroke-width=\"1.5\"/>\n",
                                            x, y, w, h));
    }
  }
  absl::StrAppend(&svg, "</svg>\n");
  return svg;
}

}  // namespace xhc::scheduler
