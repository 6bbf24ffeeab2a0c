#ifndef XHC_RUNTIME_LAB_STUDY_CHART_H_
#define XHC_RUNTIME_LAB_STUDY_CHART_H_

// Bar and scatter charts drawn with cairo (Debian libcairo2) in a real font (DejaVu Sans via
// cairo's toy text API and fontconfig), to PNG, SVG and PDF from the same drawing calls, so
// the three files always show the same picture: title, axes with ticks and tick labels, axis
// labels, category labels (rotated when they would overlap), and a legend.
//
// cairo's SVG writes text as glyph outlines (it looks the same without the font installed), so
// the SVG also carries every drawn label as text in <title> and <desc>, for search and screen
// readers.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xhc::study {

struct BarChart {
  std::string title, y_label;
  std::vector<std::string> categories;      // groups along x
  std::vector<std::string> series;          // bars within a group (legend)
  std::vector<std::vector<double>> values;  // [series][category]; < 0 = missing
};

struct ScatterChart {
  std::string title, x_label, y_label;
  std::vector<std::string> series;                             // legend, one colour each
  std::vector<std::vector<std::pair<double, double>>> points;  // [series] -> (x, y)
  bool diagonal = true;                                        // draw y = x
  // Learning curves: each series' points joined in order, and x and y on their own scales
  // (both from 0) instead of one shared scale.
  bool connect = false;
};

enum class ChartFormat { kPng, kSvg, kPdf };

// Size of every chart: pixels in the PNG, points in the SVG and PDF.
constexpr int kChartWidth = 800, kChartHeight = 480;

// The file's bytes; kInternal naming cairo's error if drawing fails.
absl::StatusOr<std::string> RenderChart(const BarChart& chart, ChartFormat format);
absl::StatusOr<std::string> RenderChart(const ScatterChart& chart, ChartFormat format);

// Writes base.png, base.svg and base.pdf; an error names the file.
absl::Status WriteChartFiles(const BarChart& chart, const std::string& base);
absl::Status WriteChartFiles(const ScatterChart& chart, const std::string& base);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_LAB_STUDY_CHART_H_
