#include "runtime/device/device.h"

#include <utility>

namespace xhc::device {

const char* MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return "host";
    case MemoryKind::kDevice: return "device";
  }
  return "unknown";
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(std::exchange(other.device_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      kind_(other.kind_) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    device_ = std::exchange(other.device_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  if (data_ != nullptr) device_->Free(data_, bytes_, kind_);
  device_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace xhc::device
