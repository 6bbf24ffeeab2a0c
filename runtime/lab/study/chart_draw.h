#ifndef XHC_RUNTIME_LAB_STUDY_CHART_DRAW_H_
#define XHC_RUNTIME_LAB_STUDY_CHART_DRAW_H_

// The drawing half of chart.h: lays a chart out and draws it on any cairo surface of
// kChartWidth x kChartHeight units (chart.cc picks the surface: image, SVG or PDF).

#include <cairo/cairo.h>

#include <string>
#include <vector>

#include "runtime/lab/study/chart.h"

namespace xhc::study {

// Each returns every text it drew (title, axis labels, tick labels, categories, legend), in
// drawing order.
std::vector<std::string> DrawBars(cairo_t* cr, const BarChart& chart);
std::vector<std::string> DrawScatter(cairo_t* cr, const ScatterChart& chart);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_CHART_DRAW_H_
