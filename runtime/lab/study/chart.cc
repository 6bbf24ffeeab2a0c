// The file half of chart.h: one cairo surface per format, drawn by chart_draw.cc, written
// to memory through cairo's stream callbacks.
#include "runtime/lab/study/chart.h"

#include <cairo/cairo-pdf.h>
#include <cairo/cairo-svg.h>
#include <cairo/cairo.h>

#include <fstream>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "runtime/lab/study/chart_draw.h"

namespace xhc::study {
namespace {

using DrawFn = std::function<std::vector<std::string>(cairo_t*)>;

cairo_status_t AppendBytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

std::string XmlEscape(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// cairo's SVG draws glyph outlines; the labels go in as text right after the <svg> tag.
absl::StatusOr<std::string> AddSvgText(std::string svg, const std::vector<std::string>& texts) {
  const size_t open = svg.find("<svg");
  const size_t end = open == std::string::npos ? open : svg.find('>', open);
  if (end == std::string::npos) return absl::InternalError("cairo wrote an SVG without <svg>");
  const std::string title = texts.empty() ? "" : texts.front();
  std::vector<std::string> rest(texts.begin() + (texts.empty() ? 0 : 1), texts.end());
  svg.insert(end + 1, absl::StrCat("\n<title>", XmlEscape(title), "</title>\n<desc>",
                                   XmlEscape(absl::StrJoin(rest, "\n")), "</desc>"));
  return svg;
}

absl::Status CairoError(cairo_status_t status, const char* what) {
  return absl::InternalError(absl::StrCat("cairo ", what, ": ", cairo_status_to_string(status)));
}

// Draws on `surface`, finishes it and destroys it; the texts drawn, or cairo's error.
absl::StatusOr<std::vector<std::string>> DrawOn(cairo_surface_t* surface, const DrawFn& draw,
                                                bool keep_surface) {
  cairo_t* cr = cairo_create(surface);
  std::vector<std::string> texts = draw(cr);
  const cairo_status_t drawn = cairo_status(cr);
  cairo_destroy(cr);
  if (!keep_surface) cairo_surface_finish(surface);
  const cairo_status_t finished = cairo_surface_status(surface);
  if (drawn != CAIRO_STATUS_SUCCESS) return CairoError(drawn, "drawing");
  if (finished != CAIRO_STATUS_SUCCESS) return CairoError(finished, "surface");
  return texts;
}

absl::StatusOr<std::string> Render(const DrawFn& draw, ChartFormat format) {
  std::string bytes;
  cairo_surface_t* surface = nullptr;
  switch (format) {
    case ChartFormat::kPng:
      surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, kChartWidth, kChartHeight);
      break;
    case ChartFormat::kSvg:
      surface = cairo_svg_surface_create_for_stream(AppendBytes, &bytes, kChartWidth, kChartHeight);
      break;
    case ChartFormat::kPdf:
      surface = cairo_pdf_surface_create_for_stream(AppendBytes, &bytes, kChartWidth, kChartHeight);
      break;
  }
  absl::StatusOr<std::vector<std::string>> texts =
      DrawOn(surface, draw, format == ChartFormat::kPng);
  if (texts.ok() && format == ChartFormat::kPng) {
    const cairo_status_t s = cairo_surface_write_to_png_stream(surface, AppendBytes, &bytes);
    if (s != CAIRO_STATUS_SUCCESS) texts = CairoError(s, "PNG encoding");
  }
  cairo_surface_destroy(surface);
  if (!texts.ok()) return texts.status();
  if (format == ChartFormat::kSvg) return AddSvgText(std::move(bytes), *texts);
  return bytes;
}

absl::Status WriteAll(const DrawFn& draw, const std::string& base) {
  const std::pair<ChartFormat, const char*> kinds[] = {
      {ChartFormat::kPng, ".png"}, {ChartFormat::kSvg, ".svg"}, {ChartFormat::kPdf, ".pdf"}};
  for (const auto& [format, ext] : kinds) {
    const std::string path = base + ext;
    absl::StatusOr<std::string> bytes = Render(draw, format);
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          absl::StrCat(path, ": ", bytes.status().message()));
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << *bytes;
    out.close();
    if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RenderChart(const BarChart& chart, ChartFormat format) {
  return Render([&](cairo_t* cr) { return DrawBars(cr, chart); }, format);
}

absl::StatusOr<std::string> RenderChart(const ScatterChart& chart, ChartFormat format) {
  return Render([&](cairo_t* cr) { return DrawScatter(cr, chart); }, format);
}

absl::Status WriteChartFiles(const BarChart& chart, const std::string& base) {
  return WriteAll([&](cairo_t* cr) { return DrawBars(cr, chart); }, base);
}

absl::Status WriteChartFiles(const ScatterChart& chart, const std::string& base) {
  return WriteAll([&](cairo_t* cr) { return DrawScatter(cr, chart); }, base);
}

}  // namespace xhc::study
