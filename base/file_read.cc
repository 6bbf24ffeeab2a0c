#include "base/file_read.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace xhc {

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  std::string bytes{std::istreambuf_iterator<char>(in), {}};
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return bytes;
}

}  // namespace xhc
