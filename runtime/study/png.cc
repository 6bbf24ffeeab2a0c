#include "runtime/study/png.h"

#include <algorithm>

namespace xhc::study {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

void PutChunk(std::string* out, const char type[5], const std::string& data) {
  PutU32(out, static_cast<uint32_t>(data.size()));
  std::string body(type, 4);
  body += data;
  out->append(body);
  PutU32(out, Crc32(reinterpret_cast<const uint8_t*>(body.data()), body.size()));
}

// zlib header, stored deflate blocks (at most 65535 bytes each), Adler-32 of the raw data.
std::string ZlibStored(const std::vector<uint8_t>& raw) {
  std::string z = {static_cast<char>(0x78), static_cast<char>(0x01)};
  size_t pos = 0;
  do {
    const size_t len = std::min<size_t>(65535, raw.size() - pos);
    const bool final_block = pos + len == raw.size();
    z.push_back(final_block ? 1 : 0);  // BFINAL, BTYPE = 00 (stored)
    z.push_back(static_cast<char>(len & 0xff));
    z.push_back(static_cast<char>(len >> 8));
    z.push_back(static_cast<char>(~len & 0xff));
    z.push_back(static_cast<char>((~len >> 8) & 0xff));
    z.append(reinterpret_cast<const char*>(raw.data()) + pos, len);
    pos += len;
  } while (pos < raw.size());
  PutU32(&z, Adler32(raw.data(), raw.size()));
  return z;
}

}  // namespace

void Image::Set(int x, int y, uint32_t color) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
  p[0] = color >> 16, p[1] = (color >> 8) & 0xff, p[2] = color & 0xff;
}

uint32_t Crc32(const uint8_t* data, size_t size, uint32_t crc) {
  crc = ~crc;
  for (size_t n = 0; n < size; ++n) {
    crc ^= data[n];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

uint32_t Adler32(const uint8_t* data, size_t size) {
  uint32_t a = 1, b = 0;
  for (size_t n = 0; n < size; ++n) {
    a = (a + data[n]) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

std::string EncodePng(const Image& image) {
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  PutU32(&ihdr, image.width);
  PutU32(&ihdr, image.height);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8 bit, RGB, deflate, filter 0, no interlace
  PutChunk(&out, "IHDR", ihdr);
  std::vector<uint8_t> raw;
  raw.reserve(static_cast<size_t>(image.height) * (image.width * 3 + 1));
  for (int y = 0; y < image.height; ++y) {
    raw.push_back(0);  // filter type None
    const uint8_t* row = &image.rgb[static_cast<size_t>(y) * image.width * 3];
    raw.insert(raw.end(), row, row + image.width * 3);
  }
  PutChunk(&out, "IDAT", ZlibStored(raw));
  PutChunk(&out, "IEND", "");
  return out;
}

}  // namespace xhc::study
