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
  return std::nullopt;
}

}  // namespace xhc::scheduler
