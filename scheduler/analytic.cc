#include "scheduler/analytic.h"

namespace xhc::scheduler {

std::optional<double> AnalyticBubble(const Schedule& s, const SimCosts& c) {
  const double pp = s.num_stages;
  if (s.type == "gpipe" || s.type == "1f1b") return (pp - 1) * (c.f + c.b);
  if (s.type == "interleaved1f1b") return (s.num_ranks - 1) * (c.f + c.b);
  if (s.type == "zb1p") return (pp - 1) * (c.f + c.b - 2 * c.w);
  if (s.type == "dualpipe" || s.type == "dualpipev") {
    return (pp / 2 - 1) * (c.FB() + c.b - 3 * c.w);
  }
  const double R = s.num_ranks;
  // Below R micro-batches the looped types cannot keep the pipeline full: no formula.
  const bool full = s.num_microbatches >= s.num_ranks;
  if (s.type == "looped_bfs" && full) return (R - 1) * (c.f + c.b);
  if (s.type == "interleaved_zb" && full && c.w <= c.f && c.w <= c.i) {
    return (R - 1) * (c.f + c.i - c.w);
  }
  // ZB-V is zero bubble only with F = I = W; what remains is the start-up skew.
  if (s.type == "zbv" && s.num_microbatches >= 2 * s.num_ranks - 1 && c.f == c.i && c.i == c.w) {
    return (R - 1) * c.f;
  }
  return std::nullopt;
}

}  // namespace xhc::scheduler
