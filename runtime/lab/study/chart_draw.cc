// Chart layout and drawing with cairo. Text is measured with the font it is drawn in, so
// tick labels right-align on the axis, the legend box fits its longest entry, and category
// labels are rotated only when they would not fit side by side.
#include "runtime/lab/study/chart_draw.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "runtime/lab/study/axis.h"

namespace xhc::study {
namespace {

constexpr uint32_t kPalette[] = {0x4c72b0, 0xdd8452, 0x55a868, 0xc44e52,
                                 0x8172b3, 0x937860, 0xda8bc3, 0x8c8c8c};
constexpr uint32_t kInk = 0x222222, kGrid = 0xe0e0e0, kDiagonal = 0x999999;
constexpr char kFont[] = "DejaVu Sans";
constexpr double kTitleSize = 15, kLabelSize = 12, kTickSize = 11;

uint32_t SeriesColor(size_t i) { return kPalette[i % (sizeof(kPalette) / sizeof(kPalette[0]))]; }

// Drawing state shared by the chart kinds: the cairo context, the plot rectangle and the texts
// drawn so far.
class Painter {
 public:
  explicit Painter(cairo_t* cr) : cr_(cr) {
    SetColor(0xffffff);
    cairo_paint(cr_);
    cairo_set_line_width(cr_, 1.0);
  }

  void SetColor(uint32_t rgb) {
    cairo_set_source_rgb(cr_, ((rgb >> 16) & 0xff) / 255.0, ((rgb >> 8) & 0xff) / 255.0,
                         (rgb & 0xff) / 255.0);
  }

  void Font(double size, bool bold = false) {
    cairo_select_font_face(cr_, kFont, CAIRO_FONT_SLANT_NORMAL,
                           bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr_, size);
  }

  double TextWidth(const std::string& text) {
    cairo_text_extents_t e;
    cairo_text_extents(cr_, text.c_str(), &e);
    return e.x_advance;
  }

  // Text whose anchor point (x, y) is at fraction `ax` of its width (0 left, 0.5 centre,
  // 1 right) and `ay` of the font's cap height above the baseline (0.5: vertically centred),
  // rotated by `angle` radians around the anchor.
  void Text(const std::string& text, double x, double y, double ax, double ay = 0,
            double angle = 0) {
    cairo_font_extents_t fe;
    cairo_font_extents(cr_, &fe);
    cairo_save(cr_);
    cairo_translate(cr_, x, y);
    cairo_rotate(cr_, angle);
    cairo_move_to(cr_, -ax * TextWidth(text), ay * fe.ascent * 0.75);
    SetColor(kInk);
    cairo_show_text(cr_, text.c_str());
    cairo_restore(cr_);
    texts_.push_back(text);
  }

  void Line(double x0, double y0, double x1, double y1, uint32_t color, double width = 1) {
    SetColor(color);
    cairo_set_line_width(cr_, width);
    cairo_move_to(cr_, x0, y0);
    cairo_line_to(cr_, x1, y1);
    cairo_stroke(cr_);
  }

  void Rect(double x, double y, double w, double h, uint32_t color) {
    SetColor(color);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
  }

  void Dot(double x, double y, double r, uint32_t color) {
    SetColor(color);
    cairo_arc(cr_, x, y, r, 0, 2 * M_PI);
    cairo_fill_preserve(cr_);
    SetColor(0xffffff);
    cairo_set_line_width(cr_, 0.8);
    cairo_stroke(cr_);
  }

  cairo_t* cr() { return cr_; }
  std::vector<std::string> TakeTexts() { return std::move(texts_); }

 private:
  cairo_t* cr_;
  std::vector<std::string> texts_;
};

// The plot rectangle, after the margins that the title, tick labels and legend need.
struct Frame {
  double left, top, right, bottom;
  double width() const { return right - left; }
  double height() const { return bottom - top; }
};

// Title, legend (right), y axis with grid, ticks and rotated label. `bottom_room` is what the
// x-axis labels below the plot need. Returns the plot rectangle.
Frame DrawFrame(Painter& p, const std::string& title, const std::string& y_label,
                const AxisTicks& y, const std::vector<std::string>& series, double bottom_room) {
  p.Font(kTitleSize, true);
  p.Text(title, kChartWidth / 2.0, 28, 0.5);
  p.Font(kTickSize);
  double legend_w = 0;
  for (const std::string& s : series) legend_w = std::max(legend_w, p.TextWidth(s));
  legend_w = series.empty() ? 0 : legend_w + 34;
  double tick_w = 0;
  for (int i = 0; i <= y.count(); ++i) tick_w = std::max(tick_w, p.TextWidth(y.Label(i)));
  Frame f{30 + tick_w + 12, 52, kChartWidth - 20 - legend_w - (series.empty() ? 0 : 12),
          kChartHeight - bottom_room};
  for (int i = 0; i <= y.count(); ++i) {
    const double yy = f.bottom - f.height() * i / y.count();
    if (i > 0) p.Line(f.left, yy, f.right, yy, kGrid);
    p.Line(f.left - 5, yy, f.left, yy, kInk);
    p.Text(y.Label(i), f.left - 8, yy, 1, 0.5);
  }
  p.Line(f.left, f.top, f.left, f.bottom, kInk);
  p.Line(f.left, f.bottom, f.right, f.bottom, kInk);
  p.Font(kLabelSize);
  p.Text(y_label, 16, (f.top + f.bottom) / 2, 0.5, 0.5, -M_PI / 2);
  if (!series.empty()) {  // legend: a framed box top right
    p.Font(kTickSize);
    const double x = f.right + 12, h = 20.0 * series.size() + 8;
    p.Rect(x, f.top, legend_w, h, 0xffffff);
    cairo_rectangle(p.cr(), x + 0.5, f.top + 0.5, legend_w - 1, h - 1);
    p.SetColor(0xbbbbbb);
    cairo_stroke(p.cr());
    for (size_t s = 0; s < series.size(); ++s) {
      const double yy = f.top + 14 + 20.0 * s;
      p.Rect(x + 8, yy - 6, 12, 12, SeriesColor(s));
      p.Text(series[s], x + 26, yy, 0, 0.5);
    }
  }
  return f;
}

}  // namespace

std::vector<std::string> DrawBars(cairo_t* cr, const BarChart& c) {
  Painter p(cr);
  double v_max = 0;
  for (const auto& row : c.values)
    for (double v : row) v_max = std::max(v_max, v);
  const AxisTicks y = AxisFromZero(v_max * 1.05);  // headroom above the tallest bar
  // Category labels: horizontal if the widest fits its group, else rotated 35 degrees.
  p.Font(kTickSize);
  double label_w = 0;
  for (const std::string& k : c.categories) label_w = std::max(label_w, p.TextWidth(k));
  const double approx_group = 560.0 / std::max<size_t>(c.categories.size(), 1);
  const bool rotate = label_w > approx_group * 0.95;
  const double angle = -35 * M_PI / 180;
  const double bottom_room = rotate ? 24 + label_w * std::sin(-angle) : 40;
  const Frame f = DrawFrame(p, c.title, c.y_label, y, c.series, bottom_room);
  const double group_w = f.width() / std::max<size_t>(c.categories.size(), 1);
  const double bar_w = group_w * 0.8 / std::max<size_t>(c.series.size(), 1);
  p.Font(kTickSize);
  for (size_t k = 0; k < c.categories.size(); ++k) {
    const double gx = f.left + group_w * k + group_w * 0.1;
    for (size_t s = 0; s < c.series.size() && s < c.values.size(); ++s) {
      const double v = k < c.values[s].size() ? c.values[s][k] : -1;
      if (v < 0) continue;  // missing: no bar
      const double h = f.height() * v / y.hi;
      p.Rect(gx + bar_w * s, f.bottom - h, bar_w - 1, h, SeriesColor(s));
    }
    const double cx = f.left + group_w * (k + 0.5);
    p.Line(cx, f.bottom, cx, f.bottom + 4, kInk);
    if (rotate) {
      p.Text(c.categories[k], cx + 4, f.bottom + 10, 1, 0.5, angle);
    } else {
      p.Text(c.categories[k], cx, f.bottom + 18, 0.5);
    }
  }
  return p.TakeTexts();
}

std::vector<std::string> DrawScatter(cairo_t* cr, const ScatterChart& c) {
  Painter p(cr);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  double x_lo = lo, x_hi = hi;
  for (const auto& pts : c.points) {
    for (const auto& [x, y] : pts) {
      lo = std::min({lo, x, y}), hi = std::max({hi, x, y});
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1, x_lo = 0, x_hi = 1;
  AxisTicks tx, ty;
  if (c.connect) {  // learning curves: axis.h says how each axis fits
    double x_pos = std::numeric_limits<double>::infinity();  // smallest x > 0
    for (const auto& pts : c.points) {
      for (const auto& [x, y] : pts) {
        if (x > 0) x_pos = std::min(x_pos, x);
      }
    }
    tx = CurvesWantLogX(c.points) ? LogAxis(x_pos, x_hi) : AxisFit(x_lo, x_hi);
    const auto [y_lo, y_hi] = CurveYRange(c.points);
    ty = AxisFit(y_lo, y_hi);
  } else {  // one scale on both axes, so y = x is the diagonal; 5% keeps dots off the frame
    const double pad = 0.05 * std::max(hi - lo, 1e-9);
    tx = ty = AxisFit(lo - pad, hi + pad);
  }
  const Frame f = DrawFrame(p, c.title, c.y_label, ty, c.series, 56);
  auto px = [&](double x) { return f.left + f.width() * tx.Fraction(x); };
  auto py = [&](double y) { return f.bottom - f.height() * ty.Fraction(y); };
  p.Font(kTickSize);
  for (int i = 0; i <= tx.count(); ++i) {
    const double x = px(tx.Value(i));
    if (i > 0) p.Line(x, f.top, x, f.bottom, kGrid);
    p.Line(x, f.bottom, x, f.bottom + 5, kInk);
    p.Text(tx.Label(i), x, f.bottom + 18, 0.5);
  }
  p.Font(kLabelSize);
  p.Text(c.x_label + (tx.log ? " (log scale)" : ""), (f.left + f.right) / 2, f.bottom + 42, 0.5);
  // Whatever lies outside the axes' ranges (a curve's first drop) is cut at the frame.
  cairo_save(p.cr());
  cairo_rectangle(p.cr(), f.left, f.top, f.width(), f.height());
  cairo_clip(p.cr());
  if (c.diagonal) {
    const double dashes[] = {5, 4};
    cairo_set_dash(p.cr(), dashes, 2, 0);
    p.Line(px(tx.lo), py(tx.lo), px(tx.hi), py(tx.hi), kDiagonal);
    cairo_set_dash(p.cr(), nullptr, 0, 0);
  }
  for (size_t s = 0; s < c.points.size(); ++s) {
    if (c.connect) {
      for (size_t i = 1; i < c.points[s].size(); ++i) {
        p.Line(px(c.points[s][i - 1].first), py(c.points[s][i - 1].second),
               px(c.points[s][i].first), py(c.points[s][i].second), SeriesColor(s), 1.5);
      }
    }
    for (const auto& [x, y] : c.points[s]) p.Dot(px(x), py(y), c.connect ? 3 : 4.5, SeriesColor(s));
  }
  cairo_restore(p.cr());
  return p.TakeTexts();
}

}  // namespace xhc::study
