// Rasterizer backend of chart.h: filled rectangles, Bresenham lines, filled dots and text in
// a 3x5 pixel font drawn at 2x (lower case is drawn as upper case; unknown glyphs as a box).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "runtime/study/chart.h"

namespace xhc::study {
namespace {

// Rows top to bottom, three pixels each, '1' = ink.
const std::map<char, const char*>& Font() {
  static const auto* font = new std::map<char, const char*>{
      {'0', "111101101101111"}, {'1', "010110010010111"}, {'2', "111001111100111"},
      {'3', "111001111001111"}, {'4', "101101111001001"}, {'5', "111100111001111"},
      {'6', "111100111101111"}, {'7', "111001001001001"}, {'8', "111101111101111"},
      {'9', "111101111001111"}, {'A', "010101111101101"}, {'B', "110101110101110"},
      {'C', "011100100100011"}, {'D', "110101101101110"}, {'E', "111100110100111"},
      {'F', "111100110100100"}, {'G', "011100101101011"}, {'H', "101101111101101"},
      {'I', "111010010010111"}, {'J', "001001001101010"}, {'K', "101101110101101"},
      {'L', "100100100100111"}, {'M', "101111111101101"}, {'N', "110101101101101"},
      {'O', "010101101101010"}, {'P', "110101110100100"}, {'Q', "010101101110011"},
      {'R', "110101110101101"}, {'S', "011100010001110"}, {'T', "111010010010010"},
      {'U', "101101101101111"}, {'V', "101101101101010"}, {'W', "101101111111101"},
      {'X', "101101010101101"}, {'Y', "101101010010010"}, {'Z', "111001010100111"},
      {'.', "000000000000010"}, {'-', "000000111000000"}, {'/', "001001010100100"},
      {'%', "101001010100101"}, {'(', "010100100100010"}, {')', "010001001001010"},
      {':', "000010000010000"}, {'=', "000111000111000"}, {'_', "000000000000111"},
      {'+', "000010111010000"}, {',', "000000000010100"}, {' ', "000000000000000"},
      {'<', "001010100010001"}, {'>', "100010001010100"}, {'|', "010010010010010"},
  };
  return *font;
}

constexpr int kScale = 2, kAdvance = 4 * kScale;

void DrawText(Image& img, double x, double y, const std::string& text, bool middle,
              uint32_t color) {
  int cx = static_cast<int>(middle ? x - text.size() * kAdvance / 2.0 : x);
  const int top = static_cast<int>(y) - 5 * kScale;  // y is the baseline, as in SVG
  for (char ch : text) {
    auto it = Font().find(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
    const char* glyph = it != Font().end() ? it->second : "111101101101111";
    for (int row = 0; row < 5; ++row) {
      for (int col = 0; col < 3; ++col) {
        if (glyph[row * 3 + col] != '1') continue;
        for (int dy = 0; dy < kScale; ++dy) {
          for (int dx = 0; dx < kScale; ++dx) {
            img.Set(cx + col * kScale + dx, top + row * kScale + dy, color);
          }
        }
      }
    }
    cx += kAdvance;
  }
}

void DrawLine(Image& img, int x0, int y0, int x1, int y1, uint32_t color) {
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  while (true) {
    img.Set(x0, y0, color);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

}  // namespace

Image Rasterize(const Layout& l) {
  Image img(l.width, l.height);
  for (const Primitive& p : l.items) {
    switch (p.kind) {
      case Primitive::kRect:
        for (int y = static_cast<int>(std::lround(p.y0)); y < std::lround(p.y0 + p.y1); ++y) {
          for (int x = static_cast<int>(std::lround(p.x0)); x < std::lround(p.x0 + p.x1); ++x) {
            img.Set(x, y, p.color);
          }
        }
        break;
      case Primitive::kLine:
        DrawLine(img, std::lround(p.x0), std::lround(p.y0), std::lround(p.x1),
                 std::lround(p.y1), p.color);
        break;
      case Primitive::kDot: {
        const int r = static_cast<int>(p.x1);
        for (int dy = -r; dy <= r; ++dy) {
          for (int dx = -r; dx <= r; ++dx) {
            if (dx * dx + dy * dy <= r * r) img.Set(std::lround(p.x0) + dx, std::lround(p.y0) + dy, p.color);
          }
        }
        break;
      }
      case Primitive::kText:
        DrawText(img, p.x0, p.y0, p.text, p.anchor_middle, p.color);
        break;
    }
  }
  return img;
}

}  // namespace xhc::study
