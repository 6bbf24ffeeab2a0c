#ifndef XHC_RUNTIME_DATA_CORPUS_H_
#define XHC_RUNTIME_DATA_CORPUS_H_

// A byte-level corpus (token = byte value, vocabulary 256) loaded from files or globs, split
// deterministically into a training and a validation part.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/common/config.h"

namespace xhc {

struct Corpus {
  std::vector<uint8_t> train;
  std::vector<uint8_t> val;
  std::vector<std::string> files;  // in the order they were concatenated
};

// Expands each pattern (a path or a glob), sorts the matches, drops duplicates by real path
// and fortune(6) index files (`X.dat` beside `X`), and concatenates the bytes. A pattern matching
// nothing, or a corpus too small for `min_train_bytes`, is an error naming the pattern. Validation
// is every (1/val_fraction)-th 4 KiB block, so it samples the whole corpus.
absl::StatusOr<Corpus> LoadCorpus(const std::vector<std::string>& patterns, double val_fraction,
                                  int64_t min_train_bytes);

// The corpus a job's config names (`data.train`, `data.val_fraction`), at least 8 training
// sequences of `model.seq_len + 1` bytes: what the trainer, the launcher's preflight and every
// worker load, so all three refuse the same config the same way.
absl::StatusOr<Corpus> LoadTrainingCorpus(const Config& config);

// Bytes per split block: 4 KiB, halved (down to 64) until the corpus has at least 8
// validation blocks.
size_t SplitBlockSize(size_t total_bytes, int64_t stride);

}  // namespace xhc

#endif  // XHC_RUNTIME_DATA_CORPUS_H_
