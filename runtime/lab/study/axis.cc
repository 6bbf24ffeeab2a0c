#include "runtime/lab/study/axis.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace xhc::study {
namespace {

// 1, 2 or 5 times a power of ten: the smallest such step giving at most about 5 intervals.
double NiceStep(double span) {
  const double raw = span / 5, p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw) return m * p;
  }
  return 10 * p;
}

int DecimalsFor(double step) {
  return std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
}

}  // namespace

int AxisTicks::count() const {
  if (log) return static_cast<int>(std::lround(std::log10(hi / lo)));
  return static_cast<int>(std::lround((hi - lo) / step));
}

double AxisTicks::Value(int i) const { return log ? lo * std::pow(10.0, i) : lo + step * i; }

std::string AxisTicks::Label(int i) const {
  if (log) return absl::StrFormat("%g", Value(i));
  const double v = Value(i);
  return absl::StrFormat("%.*f", decimals, std::fabs(v) < step * 1e-9 ? 0.0 : v);
}

double AxisTicks::Fraction(double v) const {
  if (log) return v > 0 ? std::log10(v / lo) / std::log10(hi / lo) : -1;
  return (v - lo) / (hi - lo);
}

AxisTicks AxisFromZero(double v_max) {
  AxisTicks t;
  if (!(v_max > 0) || !std::isfinite(v_max)) return t;
  t.step = NiceStep(v_max);
  t.hi = std::ceil(v_max / t.step - 1e-9) * t.step;
  t.decimals = DecimalsFor(t.step);
  return t;
}

AxisTicks AxisFit(double lo, double hi) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return AxisTicks{};
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(hi))) {  // one value: a unit around it
    const double pad = std::max(std::fabs(hi) * 0.05, 1e-6);
    lo -= pad, hi += pad;
  }
  AxisTicks t;
  t.step = NiceStep(hi - lo);
  t.lo = std::floor(lo / t.step + 1e-9) * t.step;
  t.hi = std::ceil(hi / t.step - 1e-9) * t.step;
  t.decimals = DecimalsFor(t.step);
  return t;
}

AxisTicks LogAxis(double lo, double hi) {
  if (!(lo > 0) || !(hi > lo) || !std::isfinite(hi)) return AxisFit(lo, hi);
  AxisTicks t;
  t.log = true;
  t.lo = std::pow(10.0, std::floor(std::log10(lo) + 1e-9));
  t.hi = std::pow(10.0, std::ceil(std::log10(hi) - 1e-9));
  if (t.hi <= t.lo) t.hi = t.lo * 10;
  return t;
}

std::pair<double, double> CurveYRange(const std::vector<Curve>& curves) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Curve& c : curves) {
    if (c.empty()) continue;
    const double x0 = c.front().first, x1 = c.back().first;
    const double past = x0 + 0.1 * (x1 - x0);
    for (const auto& [x, y] : c) {
      if (!std::isfinite(y)) continue;
      lo = std::min(lo, y);
      // The first point counts only for a curve of one or two points (nothing after it).
      if (x >= past || c.size() <= 2) hi = std::max(hi, y);
    }
  }
  if (!std::isfinite(lo)) return {0, 1};
  if (!std::isfinite(hi)) hi = lo;
  const double pad = 0.05 * std::max(hi - lo, 1e-9);
  return {lo - pad, hi + pad};
}

bool CurvesWantLogX(const std::vector<Curve>& curves) {
  double shortest = std::numeric_limits<double>::infinity(), longest = 0;
  for (const Curve& c : curves) {
    if (c.empty() || !(c.back().first > 0)) continue;
    shortest = std::min(shortest, c.back().first);
    longest = std::max(longest, c.back().first);
  }
  return std::isfinite(shortest) && longest > 5 * shortest;
}

}  // namespace xhc::study
