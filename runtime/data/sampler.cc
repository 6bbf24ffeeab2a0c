#include "runtime/data/sampler.h"

#include "base/hash.h"

namespace xhc {

BatchSampler::BatchSampler(const std::vector<uint8_t>* data, uint64_t seed, int batch, int seq_len)
    : data_(data), seed_(seed), batch_(batch), seq_len_(seq_len) {}

TokenBatch BatchSampler::Window(uint64_t key) const {
  TokenBatch out;
  out.batch = batch_;
  out.seq_len = seq_len_;
  out.inputs.resize(static_cast<size_t>(batch_) * seq_len_);
  out.targets.resize(out.inputs.size());
  const uint64_t num_starts = data_->size() - static_cast<uint64_t>(seq_len_);
  for (int b = 0; b < batch_; ++b) {
    const uint64_t start = Mix64(key ^ Mix64(static_cast<uint64_t>(b) + 1)) % num_starts;
    for (int t = 0; t < seq_len_; ++t) {
      out.inputs[static_cast<size_t>(b) * seq_len_ + t] = (*data_)[start + t];
      out.targets[static_cast<size_t>(b) * seq_len_ + t] = (*data_)[start + t + 1];
    }
  }
  return out;
}

TokenBatch BatchSampler::Train(int64_t step, int microbatch_idx) const {
  const uint64_t key = Mix64(seed_ ^ Mix64(static_cast<uint64_t>(step) * 0x10001ull +
                                           static_cast<uint64_t>(microbatch_idx)));
  return Window(key);
}

TokenBatch BatchSampler::Eval(int eval_idx) const {
  return Window(Mix64(~seed_ ^ Mix64(0xe7a1ull + static_cast<uint64_t>(eval_idx))));
}

TokenBatch FirstRows(const std::vector<uint8_t>& bytes, int batch, int seq_len) {
  TokenBatch out;
  out.batch = batch;
  out.seq_len = seq_len;
  out.inputs.resize(static_cast<size_t>(batch) * seq_len);
  out.targets.resize(out.inputs.size());
  for (int b = 0; b < batch; ++b) {
    const size_t row = static_cast<size_t>(b) * (seq_len + 1);
    for (int t = 0; t < seq_len; ++t) {
      out.inputs[static_cast<size_t>(b) * seq_len + t] = bytes[row + t];
      out.targets[static_cast<size_t>(b) * seq_len + t] = bytes[row + t + 1];
    }
  }
  return out;
}

}  // namespace xhc
