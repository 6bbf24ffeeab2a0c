#ifndef XHC_RUNTIME_STUDY_CHART_H_
#define XHC_RUNTIME_STUDY_CHART_H_

// Bar and scatter charts. Each chart is laid out once as a list of primitives (rectangles,
// lines, dots, text) and drawn by two backends: SVG text, and a small rasterizer (with a
// 3x5 pixel font) whose image becomes a PNG. So the SVG and the PNG always show the same.

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/study/png.h"

namespace xhc::study {

struct BarChart {
  std::string title, y_label;
  std::vector<std::string> categories;           // groups along x
  std::vector<std::string> series;               // bars within a group (legend)
  std::vector<std::vector<double>> values;       // [series][category]; < 0 = missing
};

struct ScatterChart {
  std::string title, x_label, y_label;
  std::vector<std::string> series;               // legend, one colour each
  std::vector<std::vector<std::pair<double, double>>> points;  // [series] -> (x, y)
  bool diagonal = true;                          // draw y = x
};

struct Primitive {
  enum Kind { kRect, kLine, kDot, kText } kind;
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // rect: corner + size; line: ends; dot: centre, r
  uint32_t color = 0;
  std::string text;
  bool anchor_middle = false;  // text: centred on x0 (else starts at x0)
};

struct Layout {
  int width = 720, height = 420;
  std::vector<Primitive> items;
};

Layout LayoutBars(const BarChart& chart);
Layout LayoutScatter(const ScatterChart& chart);

std::string RenderSvg(const Layout& layout);
Image Rasterize(const Layout& layout);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_STUDY_CHART_H_
