#include "runtime/data/corpus.h"

#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/status_macros.h"

namespace xhc {
namespace {

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::vector<std::string>> Expand(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  std::vector<std::string> files;
  for (const std::string& p : out) {
    if (IsRegularFile(p)) files.push_back(p);
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("data.train: '", pattern, "' matches no file"));
  }
  return files;
}

}  // namespace

absl::StatusOr<Corpus> LoadTrainingCorpus(const Config& config) {
  return LoadCorpus(config.data.train, config.data.val_fraction,
                    static_cast<int64_t>(config.model.seq_len + 1) * 8);
}

size_t SplitBlockSize(size_t total_bytes, int64_t stride) {
  size_t block = 4096;
  while (block > 64 && total_bytes / block < static_cast<size_t>(8 * stride)) block /= 2;
  return block;
}

absl::StatusOr<Corpus> LoadCorpus(const std::vector<std::string>& patterns, double val_fraction,
                                  int64_t min_train_bytes) {
  std::vector<std::string> files;
  for (const std::string& pattern : patterns) {
    ASSIGN_OR_RETURN(std::vector<std::string> matched, Expand(pattern));
    files.insert(files.end(), matched.begin(), matched.end());
  }
  const std::set<std::string> names(files.begin(), files.end());
  std::set<std::string> seen_real;
  Corpus corpus;
  std::vector<uint8_t> all;
  for (const std::string& f : files) {
    // fortune(6) ships a binary index X.dat beside each text file X: not text, skip it.
    if (absl::EndsWith(f, ".dat") && names.count(f.substr(0, f.size() - 4))) continue;
    char real[PATH_MAX];
    const std::string key = ::realpath(f.c_str(), real) ? std::string(real) : f;
    if (!seen_real.insert(key).second) continue;  // X.u8 -> X symlinks
    ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(f));
    all.insert(all.end(), bytes.begin(), bytes.end());
    corpus.files.push_back(f);
  }
  // Validation takes every k-th block of kSplitBlock bytes (k = 1 / val_fraction), so it
  // samples every file rather than only the last one in sorted order.
  const int64_t stride = std::max<int64_t>(2, std::llround(1.0 / val_fraction));
  const size_t block = SplitBlockSize(all.size(), stride);
  for (size_t begin = 0; begin < all.size(); begin += block) {
    const size_t end = std::min(all.size(), begin + block);
    const bool is_val = static_cast<int64_t>(begin / block) % stride == stride - 1;
    std::vector<uint8_t>& dst = is_val ? corpus.val : corpus.train;
    dst.insert(dst.end(), all.begin() + begin, all.begin() + end);
  }
  const int64_t num_train = static_cast<int64_t>(corpus.train.size());
  const int64_t num_val = static_cast<int64_t>(corpus.val.size());
  if (num_train < min_train_bytes || num_val < min_train_bytes / 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.train: corpus has ", all.size(), " bytes; need at least ", min_train_bytes,
        " training bytes (and a validation split of ", min_train_bytes / 8, ")"));
  }
  return corpus;
}

}  // namespace xhc
