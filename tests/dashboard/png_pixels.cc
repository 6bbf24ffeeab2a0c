#include "tests/dashboard/png_pixels.h"

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/util/run_util.h"

namespace xhc::testing {
namespace {

uint32_t Be32(const std::string& s, size_t at) {
  return (uint32_t{static_cast<uint8_t>(s[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(s[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(s[at + 2])} << 8) | static_cast<uint8_t>(s[at + 3]);
}

int Paeth(int a, int b, int c) {
  const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

}  // namespace

absl::StatusOr<PngStats> ReadPngStats(const std::string& path) {
  const std::string png = ReadText(path);
  if (png.size() < 33 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a PNG (", png.size(), " bytes)"));
  }
  PngStats st;
  int channels = 0;
  std::string idat;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t len = Be32(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (at + 12 + len > png.size()) return absl::DataLossError(path + ": truncated chunk");
    if (type == "IHDR") {
      st.width = static_cast<int>(Be32(png, at + 8));
      st.height = static_cast<int>(Be32(png, at + 12));
      const int depth = static_cast<uint8_t>(png[at + 16]);
      const int color = static_cast<uint8_t>(png[at + 17]);
      const int interlace = static_cast<uint8_t>(png[at + 20]);
      channels = color == 2 ? 3 : color == 6 ? 4 : 0;
      if (depth != 8 || channels == 0 || interlace != 0) {
        return absl::UnimplementedError(
            absl::StrCat(path, ": PNG colour type ", color, ", depth ", depth, " not read here"));
      }
    } else if (type == "IDAT") {
      idat.append(png, at + 8, len);
    }
    at += 12 + len;
  }
  const size_t stride = static_cast<size_t>(st.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * st.height);
  uLongf raw_len = raw.size();
  if (channels == 0 ||
      uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()), idat.size()) !=
          Z_OK ||
      raw_len != raw.size()) {
    return absl::DataLossError(path + ": image data does not inflate to its size");
  }
  // Undo each row's filter (PNG spec section 9), then count colours.
  std::vector<uint8_t> prev(stride, 0), row(stride);
  std::unordered_map<uint32_t, int64_t> counts;
  for (int y = 0; y < st.height; ++y) {
    const uint8_t filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? row[i - channels] : 0;
      const int b = prev[i], c = i >= static_cast<size_t>(channels) ? prev[i - channels] : 0;
      const int pred = filter == 1   ? a
                       : filter == 2 ? b
                       : filter == 3 ? (a + b) / 2
                       : filter == 4 ? Paeth(a, b, c)
                                     : 0;
      row[i] = static_cast<uint8_t>(in[i] + pred);
    }
    for (int x = 0; x < st.width; ++x) {
      const uint8_t* p = &row[x * channels];
      ++counts[(uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | p[2]];
    }
    prev = row;
  }
  int64_t most = 0;
  for (const auto& [color, n] : counts) most = std::max(most, n);
  st.distinct_colors = static_cast<int>(counts.size());
  st.most_common_share =
      static_cast<double>(most) / std::max<int64_t>(1, int64_t{st.width} * st.height);
  return st;
}

}  // namespace xhc::testing
