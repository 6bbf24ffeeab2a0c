#ifndef XHC_RUNTIME_DATA_SAMPLER_H_
#define XHC_RUNTIME_DATA_SAMPLER_H_

// Deterministic batches: the rows of micro-batch `microbatch_idx` at step `step` are a pure
// function of (seed, step, microbatch_idx, row) — never of how many workers there are or which
// rank asks — so every pipeline layout and a resumed run see exactly the same data. The
// "sampler position" in a checkpoint is therefore just the step.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace xhc {

struct TokenBatch {
  int batch = 0;                 // B rows
  int seq_len = 0;               // T tokens per row
  std::vector<int32_t> inputs;   // (B, T)
  std::vector<int32_t> targets;  // (B, T): inputs shifted by one
};

class BatchSampler {
 public:
  // `data` must outlive the sampler and hold more than seq_len + 1 bytes.
  BatchSampler(const std::vector<uint8_t>* data, uint64_t seed, int batch, int seq_len);

  // Training micro-batch: random windows.
  TokenBatch Train(int64_t step, int microbatch_idx) const;

  // Validation micro-batch `eval_idx`: fixed windows (same every evaluation).
  TokenBatch Eval(int eval_idx) const;

 private:
  TokenBatch Window(uint64_t key) const;

  const std::vector<uint8_t>* data_;
  uint64_t seed_;
  int batch_;
  int seq_len_;
};

// Rows of an evaluation file (model-spec section 8): the first B·(T+1) bytes as B rows.
TokenBatch FirstRows(const std::vector<uint8_t>& bytes, int batch, int seq_len);

}  // namespace xhc

#endif  // XHC_RUNTIME_DATA_SAMPLER_H_
