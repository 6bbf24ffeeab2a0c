#include "runtime/study/chart.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace xhc::study {
namespace {

constexpr uint32_t kPalette[] = {0x4c72b0, 0xdd8452, 0x55a868, 0xc44e52,
                                 0x8172b3, 0x937860, 0xda8bc3, 0x8c8c8c};
constexpr uint32_t kInk = 0x222222, kGrid = 0xdddddd;
constexpr double kLeft = 70, kRight = 150, kTop = 40, kBottom = 60;

uint32_t SeriesColor(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

Primitive Text(double x, double y, std::string text, bool middle = false) {
  return {Primitive::kText, x, y, 0, 0, kInk, std::move(text), middle};
}
Primitive Line(double x0, double y0, double x1, double y1, uint32_t color) {
  return {Primitive::kLine, x0, y0, x1, y1, color, "", false};
}

// A "nice" axis maximum: 1, 2 or 5 times a power of ten at or above v.
double NiceMax(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// Frame, horizontal grid with tick labels, title, y label and legend.
void AddAxes(Layout& l, const std::string& title, const std::string& y_label, double y_max,
             const std::vector<std::string>& series) {
  const double plot_h = l.height - kTop - kBottom, x_end = l.width - kRight;
  for (int t = 0; t <= 4; ++t) {
    const double y = kTop + plot_h * (1 - t / 4.0);
    l.items.push_back(Line(kLeft, y, x_end, y, kGrid));
    l.items.push_back(Text(kLeft - 50, y + 4, absl::StrFormat("%.3g", y_max * t / 4.0)));
  }
  l.items.push_back(Line(kLeft, kTop, kLeft, kTop + plot_h, kInk));
  l.items.push_back(Line(kLeft, kTop + plot_h, x_end, kTop + plot_h, kInk));
  l.items.push_back(Text(l.width / 2.0, 20, title, true));
  l.items.push_back(Text(8, kTop - 10, y_label));
  for (size_t s = 0; s < series.size(); ++s) {
    const double y = kTop + 16.0 * s;
    l.items.push_back({Primitive::kRect, x_end + 12, y, 10, 10, SeriesColor(s), "", false});
    l.items.push_back(Text(x_end + 28, y + 9, series[s]));
  }
}

}  // namespace

Layout LayoutBars(const BarChart& c) {
  Layout l;
  double y_max = 0;
  for (const auto& row : c.values) for (double v : row) y_max = std::max(y_max, v);
  y_max = NiceMax(y_max);
  AddAxes(l, c.title, c.y_label, y_max, c.series);
  const double plot_w = l.width - kLeft - kRight, plot_h = l.height - kTop - kBottom;
  const double group_w = plot_w / std::max<size_t>(c.categories.size(), 1);
  const double bar_w = group_w * 0.8 / std::max<size_t>(c.series.size(), 1);
  for (size_t k = 0; k < c.categories.size(); ++k) {
    const double gx = kLeft + group_w * k + group_w * 0.1;
    for (size_t s = 0; s < c.series.size() && s < c.values.size(); ++s) {
      const double v = k < c.values[s].size() ? c.values[s][k] : -1;
      if (v < 0) continue;
      const double h = plot_h * v / y_max;
      l.items.push_back({Primitive::kRect, gx + bar_w * s, kTop + plot_h - h, bar_w - 1, h,
                         SeriesColor(s), "", false});
    }
    l.items.push_back(Text(kLeft + group_w * (k + 0.5), kTop + plot_h + 18, c.categories[k],
                           true));
  }
  return l;
}

Layout LayoutScatter(const ScatterChart& c) {
  Layout l;
  double v_max = 0;
  for (const auto& pts : c.points) {
    for (const auto& [x, y] : pts) v_max = std::max({v_max, x, y});
  }
  v_max = NiceMax(v_max);
  AddAxes(l, c.title, c.y_label, v_max, c.series);
  const double plot_w = l.width - kLeft - kRight, plot_h = l.height - kTop - kBottom;
  auto px = [&](double x) { return kLeft + plot_w * x / v_max; };
  auto py = [&](double y) { return kTop + plot_h * (1 - y / v_max); };
  for (int t = 0; t <= 4; ++t) {
    l.items.push_back(Text(px(v_max * t / 4.0), kTop + plot_h + 18,
                           absl::StrFormat("%.3g", v_max * t / 4.0), true));
  }
  l.items.push_back(Text(l.width / 2.0 - 60, l.height - 12, c.x_label, true));
  if (c.diagonal) l.items.push_back(Line(px(0), py(0), px(v_max), py(v_max), 0x999999));
  for (size_t s = 0; s < c.points.size(); ++s) {
    for (const auto& [x, y] : c.points[s]) {
      l.items.push_back({Primitive::kDot, px(x), py(y), 4, 0, SeriesColor(s), "", false});
    }
  }
  return l;
}

std::string RenderSvg(const Layout& l) {
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" "
      "fill=\"white\"/>\n", l.width, l.height);
  for (const Primitive& p : l.items) {
    const std::string color = absl::StrFormat("#%06x", p.color);
    switch (p.kind) {
      case Primitive::kRect:
        absl::StrAppendFormat(&svg, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                              "fill=\"%s\"/>\n", p.x0, p.y0, p.x1, p.y1, color);
        break;
      case Primitive::kLine:
        absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                              "stroke=\"%s\"/>\n", p.x0, p.y0, p.x1, p.y1, color);
        break;
      case Primitive::kDot:
        absl::StrAppendFormat(&svg, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"/>\n",
                              p.x0, p.y0, p.x1, color);
        break;
      case Primitive::kText:
        absl::StrAppendFormat(
            &svg, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\"%s>%s</text>\n", p.x0, p.y0, color,
            p.anchor_middle ? " text-anchor=\"middle\"" : "",
            absl::StrReplaceAll(p.text, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}}));
        break;
    }
  }
  return svg + "</svg>\n";
}

}  // namespace xhc::study
