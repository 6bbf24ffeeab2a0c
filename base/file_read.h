#ifndef XHC_BASE_FILE_READ_H_
#define XHC_BASE_FILE_READ_H_

// Reading whole files: the one place the tree opens a file to read all of it (configs,
// checkpoints' manifests and shards, certificates, run outputs).

#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace xhc {

// The whole file as bytes; kNotFound naming `path` when it cannot be opened.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Reads `path` and parses its text with `parse` (std::string -> absl::StatusOr<T>). An error
// from either keeps its code and names `path`, so a bad config or plan says which file.
template <typename Parse>
auto ParseFile(const std::string& path, Parse&& parse)
    -> std::invoke_result_t<Parse, const std::string&> {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  auto parsed = std::forward<Parse>(parse)(*text);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        absl::StrCat(path, ": ", parsed.status().message()));
  }
  return parsed;
}

}  // namespace xhc

#endif  // XHC_BASE_FILE_READ_H_
