#include "runtime/worker/buffer_pool.h"

#include <utility>

namespace xhc::worker {

std::vector<float> BufferPool::Take(size_t n) {
  for (size_t i = spare_.size(); i-- > 0;) {
    if (spare_[i].size() != n) continue;
    std::vector<float> out = std::move(spare_[i]);
    spare_[i] = std::move(spare_.back());
    spare_.pop_back();
    return out;
  }
  return std::vector<float>(n);
}

void BufferPool::Give(std::vector<float> buffer) {
  if (buffer.empty() || spare_.size() >= kMaxSpare) return;
  spare_.push_back(std::move(buffer));
}

}  // namespace xhc::worker
