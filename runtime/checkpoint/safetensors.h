#ifndef XHC_RUNTIME_CHECKPOINT_SAFETENSORS_H_
#define XHC_RUNTIME_CHECKPOINT_SAFETENSORS_H_

// Reading and writing float32 safetensors files (the format PyTorch users export):
//   [u64 little-endian header length][JSON header][raw tensor bytes]
// header: {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
//          "__metadata__": {"key": "value"}}
// Offsets are relative to the end of the header. Only F32 is written; F32 is read (other
// dtypes are refused with a clear error naming the tensor).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc {

struct TensorView {
  std::string name;
  std::vector<int64_t> shape;   // [] for scalars
  const float* data = nullptr;  // numel(shape) floats
};

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

int64_t NumElements(const std::vector<int64_t>& shape);

// Serialises tensors (sorted by name, 8-byte aligned header) into one byte string.
std::string EncodeSafetensors(const std::vector<TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata);

struct SafetensorsContents {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Parses a whole file image. Every header field, offset and size is checked before any
// tensor is copied; errors are kDataLoss (corrupt/truncated) or kInvalidArgument (wrong
// dtype), and name `origin` (a path) and the tensor.
absl::StatusOr<SafetensorsContents> DecodeSafetensors(const std::string& bytes,
                                                      const std::string& origin);

// Reads and decodes a file, or every *.safetensors file of a directory (names must not
// repeat across files).
absl::StatusOr<SafetensorsContents> ReadSafetensorsPath(const std::string& path);

}  // namespace xhc

#endif  // XHC_RUNTIME_CHECKPOINT_SAFETENSORS_H_
