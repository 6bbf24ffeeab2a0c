// The charts as files: the PNG decodes with cairo at the chart's size and shows the bars and
// dots in their series colours and dark text pixels; the SVG is cairo's (glyph outlines for
// every drawn character) and carries the labels as text; the PDF is a PDF with an embedded
// font. Written files keep the study's names, with .svg and .pdf beside .png.
#include "runtime/lab/study/chart.h"

#include <cairo/cairo.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file_read.h"
#include "gtest/gtest.h"

namespace xhc::study {
namespace {

struct Reader {
  const std::string* bytes;
  size_t at = 0;
};

cairo_status_t ReadBytes(void* closure, unsigned char* data, unsigned int length) {
  Reader* r = static_cast<Reader*>(closure);
  if (r->at + length > r->bytes->size()) return CAIRO_STATUS_READ_ERROR;
  std::copy_n(r->bytes->data() + r->at, length, data);
  r->at += length;
  return CAIRO_STATUS_SUCCESS;
}

// Pixel statistics of a PNG decoded by cairo.
struct Pixels {
  int width = 0, height = 0;
  int of_color = 0;  // exactly the given 0xRRGGBB
  int dark = 0;      // every channel below 0x60: text and axis ink
  int non_white = 0;
};

Pixels Decode(const std::string& png, uint32_t color) {
  Reader reader{&png};
  cairo_surface_t* s = cairo_image_surface_create_from_png_stream(ReadBytes, &reader);
  Pixels p;
  if (cairo_surface_status(s) == CAIRO_STATUS_SUCCESS) {
    p.width = cairo_image_surface_get_width(s);
    p.height = cairo_image_surface_get_height(s);
    const int stride = cairo_image_surface_get_stride(s);
    const unsigned char* data = cairo_image_surface_get_data(s);
    for (int y = 0; y < p.height; ++y) {
      for (int x = 0; x < p.width; ++x) {
        uint32_t px;
        std::memcpy(&px, data + y * stride + 4 * x, 4);  // native-endian xRGB
        const uint32_t rgb = px & 0xffffff;
        const int r = rgb >> 16, g = (rgb >> 8) & 0xff, b = rgb & 0xff;
        p.of_color += rgb == color;
        p.dark += r < 0x60 && g < 0x60 && b < 0x60;
        p.non_white += rgb != 0xffffff;
      }
    }
  }
  cairo_surface_destroy(s);
  return p;
}

size_t Count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

const BarChart kBars{"Bubble by schedule (xhc, 2 ranks, M=8)",
                     "bubble fraction",
                     {"1f1b", "interleaved1f1b", "zb1p", "dualpipev"},
                     {"analytic", "simulated", "measured"},
                     {{0.2, 0.1, 0.05, 0.1}, {0.22, 0.12, 0.06, -1}, {0.3, 0.2, 0.1, 0.15}}};

TEST(Chart, BarPngDecodesAtItsSizeAndShowsBarsAndText) {
  absl::StatusOr<std::string> png = RenderChart(kBars, ChartFormat::kPng);
  ASSERT_TRUE(png.ok()) << png.status();
  const Pixels p = Decode(*png, 0x4c72b0);  // the first series' colour
  EXPECT_EQ(p.width, kChartWidth);
  EXPECT_EQ(p.height, kChartHeight);
  EXPECT_GT(p.of_color, 2000);                     // four bars of the first series
  EXPECT_GT(p.dark, 1500);                         // title, labels, ticks, axes
  EXPECT_LT(p.non_white, p.width * p.height / 2);  // a white background, not a blot
  // A missing value draws no bar: fewer pixels of the second series than of the first.
  EXPECT_LT(Decode(*png, 0xdd8452).of_color, p.of_color);
  ASSERT_TRUE(WriteChartFiles(kBars, std::string(std::getenv("TEST_TMPDIR")) + "/bars").ok());
}

TEST(Chart, SvgIsCairoOutlinesWithTheLabelsAsText) {
  absl::StatusOr<std::string> svg = RenderChart(kBars, ChartFormat::kSvg);
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_NE(svg->find("<svg"), std::string::npos);
  EXPECT_NE(svg->find("width=\"800pt\""), std::string::npos) << svg->substr(0, 300);
  EXPECT_NE(svg->find("<title>Bubble by schedule (xhc, 2 ranks, M=8)</title>"), std::string::npos);
  for (const char* label :
       {"bubble fraction", "interleaved1f1b", "dualpipev", "measured", "0.05", "0.30"}) {
    EXPECT_NE(svg->find(label), std::string::npos) << label;
  }
  // Every drawn character is a cairo glyph: more glyph uses than the title has letters.
  EXPECT_GT(Count(*svg, "xlink:href=\"#glyph"), 100u);
}

// The study's nine schedules do not fit side by side: their labels are rotated, and all of
// them are still drawn.
TEST(Chart, ManyCategoriesAreAllLabelled) {
  const std::vector<std::string> schedules = {"gpipe", "1f1b",           "interleaved1f1b",
                                              "zb1p",  "dualpipe",       "dualpipev",
                                              "zbv",   "interleaved_zb", "looped_bfs"};
  BarChart c{"Throughput by schedule and residual (2 ranks, M=8)",
             "tokens/s",
             schedules,
             {"vanilla", "mhc", "xhc"},
             {}};
  for (int s = 0; s < 3; ++s) {
    c.values.emplace_back();
    for (size_t k = 0; k < schedules.size(); ++k) c.values.back().push_back(900 + 40 * k + 70 * s);
  }
  absl::StatusOr<std::string> svg = RenderChart(c, ChartFormat::kSvg);
  ASSERT_TRUE(svg.ok()) << svg.status();
  for (const std::string& s : schedules) EXPECT_NE(svg->find(s), std::string::npos) << s;
  EXPECT_NE(svg->find("1500"), std::string::npos) << "a tick above the tallest bar (1360)";
  absl::StatusOr<std::string> png = RenderChart(c, ChartFormat::kPng);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_GT(Decode(*png, 0x55a868).of_color, 5000);  // nine bars of the third series
  ASSERT_TRUE(WriteChartFiles(c, std::string(std::getenv("TEST_TMPDIR")) + "/many").ok());
}

TEST(Chart, PdfHasAPageAndAnEmbeddedFont) {
  absl::StatusOr<std::string> pdf = RenderChart(kBars, ChartFormat::kPdf);
  ASSERT_TRUE(pdf.ok()) << pdf.status();
  EXPECT_EQ(pdf->substr(0, 5), "%PDF-");
  EXPECT_NE(pdf->find("/Type /Page"), std::string::npos);
  EXPECT_NE(pdf->find("/FontFile"), std::string::npos);
  EXPECT_NE(pdf->find("DejaVu"), std::string::npos) << "the real font, not a fallback";
}

TEST(Chart, ScatterShowsDotsAxisLabelsAndWritesThreeFiles) {
  const ScatterChart c{"Measured against simulated bubble (all runs)",
                       "simulated bubble",
                       "measured bubble",
                       {"vanilla", "xhc"},
                       {{{0.1, 0.12}, {0.2, 0.25}}, {{0.15, 0.2}, {0.3, 0.28}}},
                       true};
  absl::StatusOr<std::string> png = RenderChart(c, ChartFormat::kPng);
  ASSERT_TRUE(png.ok()) << png.status();
  const Pixels p = Decode(*png, 0xdd8452);  // the second series' dots
  EXPECT_EQ(p.width, kChartWidth);
  EXPECT_GT(p.of_color, 80);  // two dots of radius 4.5
  absl::StatusOr<std::string> svg = RenderChart(c, ChartFormat::kSvg);
  ASSERT_TRUE(svg.ok()) << svg.status();
  EXPECT_NE(svg->find("simulated bubble"), std::string::npos);
  EXPECT_NE(svg->find("measured bubble"), std::string::npos);
  const std::string base = std::string(std::getenv("TEST_TMPDIR")) + "/scatter";
  ASSERT_TRUE(WriteChartFiles(c, base).ok());
  for (const char* ext : {".png", ".svg", ".pdf"}) {
    EXPECT_GT(std::filesystem::file_size(base + ext), 1000u) << ext;
  }
  EXPECT_EQ(ReadWholeFile(base + ".png").value_or(""), *png) << "the file is the rendered PNG";
}

// Learning curves as the ablation draws them: losses near 2.0 that differ by 0.1, after a
// first drop from 5.5, one variant ten times as expensive. The y ticks span the curves'
// values, not 0 to 4 or the first drop; x is logarithmic.
TEST(Chart, LearningCurvesFitTheirAxesToTheData) {
  ScatterChart c;
  c.title = "Validation loss vs training FLOPs";
  c.x_label = "training FLOPs";
  c.y_label = "validation loss";
  c.diagonal = false;
  c.connect = true;
  c.series = {"xhc", "mhc16"};
  for (double x_max : {10.0, 100.0}) {
    std::vector<std::pair<double, double>> pts = {{x_max / 100, 5.5}};
    for (int i = 1; i <= 10; ++i) pts.push_back({x_max * i / 10, 2.0 + x_max / 1000 + 0.3 / i});
    c.points.push_back(pts);
  }
  absl::StatusOr<std::string> svg = RenderChart(c, ChartFormat::kSvg);
  ASSERT_TRUE(svg.ok()) << svg.status();
  // The drawn labels, one per line, from the SVG's <desc> (chart.h).
  const size_t a = svg->find("<desc>"), b = svg->find("</desc>");
  ASSERT_NE(a, std::string::npos);
  const std::string labels = "\n" + svg->substr(a + 6, b - a - 6) + "\n";
  EXPECT_NE(labels.find("\ntraining FLOPs (log scale)\n"), std::string::npos) << labels;
  EXPECT_NE(labels.find("\n2.00\n"), std::string::npos) << "a y tick at the curves' level\n"
                                                        << labels;
  EXPECT_EQ(labels.find("\n4\n"), std::string::npos) << labels;
  EXPECT_EQ(labels.find("\n5.50\n"), std::string::npos) << "the first drop set the range\n"
                                                        << labels;
  EXPECT_NE(labels.find("\n100\n"), std::string::npos) << "decade ticks on x\n" << labels;
}

TEST(Chart, AnUnwritableDirectoryIsAnErrorNamingTheFile) {
  const absl::Status s = WriteChartFiles(kBars, "/nonexistent-dir/chart");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent-dir/chart.png"), std::string::npos) << s;
}

}  // namespace
}  // namespace xhc::study
