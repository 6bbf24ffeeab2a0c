// main() for fuzz targets outside libFuzzer: runs LLVMFuzzerTestOneInput once per file named
// on the command line (the seed corpus and the saved crash inputs), so every input that once
// crashed a parser is replayed by the ordinary test suite. A crash, a sanitizer report or an
// uncaught exception ends the process non-zero; an unreadable file is an error too, so a
// corpus that silently went missing cannot pass.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s INPUT...\n(no inputs: the seed corpus is missing)\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; ++i) {
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "cannot read %s\n", argv[i]);
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), {});
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    std::printf("ok %s (%zu bytes)\n", argv[i], bytes.size());
  }
  std::printf("%d inputs replayed\n", argc - 1);
  return 0;
}
