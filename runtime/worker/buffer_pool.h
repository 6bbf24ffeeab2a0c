#ifndef XHC_RUNTIME_WORKER_BUFFER_POOL_H_
#define XHC_RUNTIME_WORKER_BUFFER_POOL_H_

#include <cstddef>
#include <vector>

namespace xhc::worker {

// Inter-stage buffers recycled across a worker's actions. Every buffer a stage boundary moves
// (a receive, a stage's output, an input gradient) has the same few sizes, and each is
// overwritten in full by the model or the transport: a fresh std::vector would zero-fill its
// megabytes first (4 MiB per buffer at runtime/lab/bench/peer/small.yaml's size), once per action.
class BufferPool {
 public:
  // At most this many spare buffers are kept; more are freed (a schedule holds few at once).
  static constexpr size_t kMaxSpare = 32;

  // A buffer of exactly n floats whose contents are unspecified (a spare one when there is one
  // of that size, else a new one).
  std::vector<float> Take(size_t n);
  // Keeps `buffer` for a later Take of its size (empty buffers are dropped).
  void Give(std::vector<float> buffer);

  size_t spare() const { return spare_.size(); }

 private:
  std::vector<std::vector<float>> spare_;
};

}  // namespace xhc::worker

#endif  // XHC_RUNTIME_WORKER_BUFFER_POOL_H_
