#ifndef XHC_RUNTIME_STUDY_PNG_H_
#define XHC_RUNTIME_STUDY_PNG_H_

// A minimal PNG writer with no zlib: 8-bit RGB, filter 0, and the zlib stream made of
// deflate "stored" (uncompressed) blocks, with the CRC-32 and Adler-32 checksums the format
// requires. Charts are small, so the missing compression costs a few hundred KiB at most.

#include <cstdint>
#include <string>
#include <vector>

namespace xhc::study {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel
  Image(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * h * 3, 255) {}
  void Set(int x, int y, uint32_t color);  // 0xRRGGBB; outside the image is ignored
};

uint32_t Crc32(const uint8_t* data, size_t size, uint32_t crc = 0);
uint32_t Adler32(const uint8_t* data, size_t size);

// The PNG file's bytes.
std::string EncodePng(const Image& image);

}  // namespace xhc::study

#endif  // XHC_RUNTIME_STUDY_PNG_H_
