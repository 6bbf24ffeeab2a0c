#ifndef XHC_RUNTIME_LAB_STUDY_AXIS_H_
#define XHC_RUNTIME_LAB_STUDY_AXIS_H_

// Chart axes that fit their data (the study's and the ablation's charts share them).
//
// - Bars start at 0: a bar's length is its value.
// - Learning curves: y spans where the curves are once past their first drop (the first 10%
//   of each curve's x extent is left out of the range and clipped at the top), so losses that
//   differ by 0.1 near 2.0 are not squeezed under a range from 0 or from the initial loss;
//   x is logarithmic when one curve reaches more than 5 times as far as another (an expensive
//   variant's FLOPs), from the smallest positive x; linear over the data's range otherwise.
// - Measured against predicted: one scale on both axes, fitted to the values, so y = x is
//   the diagonal and the points fill the frame.

#include <string>
#include <utility>
#include <vector>

namespace xhc::study {

// Tick marks at lo, lo + step, ..., hi (linear), or at lo, 10 lo, ..., hi (log: decades).
struct AxisTicks {
  double lo = 0, hi = 1, step = 1;
  int decimals = 0;
  bool log = false;
  int count() const;          // intervals between ticks
  double Value(int i) const;  // the i-th tick's value
  std::string Label(int i) const;
  // 0 at lo, 1 at hi (log: in decades); values outside fall outside [0, 1].
  double Fraction(double v) const;
};

// Ticks from 0 to at least v_max: a step of 1, 2 or 5 times a power of ten, about 5 intervals.
AxisTicks AxisFromZero(double v_max);
// Nice ticks covering [lo, hi] (the same steps, not necessarily from 0).
AxisTicks AxisFit(double lo, double hi);
// Decade ticks covering [lo, hi], both > 0.
AxisTicks LogAxis(double lo, double hi);

using Curve = std::vector<std::pair<double, double>>;  // (x, y) in x order

// The y range that shows where the curves differ (see the header comment), padded 5%.
std::pair<double, double> CurveYRange(const std::vector<Curve>& curves);
// Whether the curves' x extents (their last x) differ more than 5-fold: then log x, on which
// points at x <= 0 (a step-0 evaluation: no FLOPs yet) fall outside and are cut.
bool CurvesWantLogX(const std::vector<Curve>& curves);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_AXIS_H_
