#include "runtime/checkpoint/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/file_read.h"
#include "base/status_macros.h"

namespace xhc {
namespace {

absl::Status Corrupt(const std::string& origin, const std::string& what) {
  return absl::DataLossError(absl::StrCat(origin, ": ", what));
}

absl::StatusOr<Tensor> DecodeEntry(const std::string& name, const nlohmann::json& entry,
                                   const char* data, uint64_t data_size,
                                   const std::string& origin) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    return Corrupt(origin, absl::StrCat("tensor '", name, "': malformed header entry"));
  }
  if (entry["dtype"] != "F32") {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": tensor '", name, "' has dtype ",
                                                   entry["dtype"].dump(), ", expected F32"));
  }
  Tensor t;
  const auto& shape = entry["shape"];
  if (!shape.is_array()) return Corrupt(origin, absl::StrCat("tensor '", name, "': bad shape"));
  // Elements counted with an overflow check against what the file holds: a shape claiming
  // 2^60 bytes is refused here, before anything is allocated (found by hand-written inputs
  // in the fuzz corpus; the product overflowed int64 before).
  // The product of the non-zero dims must fit too: NumElements (int64, left to right) is
  // used on the shape later, and [2^62, 4, 0] holds no elements yet overflows it.
  constexpr uint64_t kMaxProduct = static_cast<uint64_t>(INT64_MAX) / sizeof(float);
  uint64_t numel = 1, nonzero = 1;
  for (const auto& d : shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Corrupt(origin, absl::StrCat("tensor '", name, "': bad shape"));
    }
    const uint64_t dim = d.get<uint64_t>();
    if (dim == 0) {
      numel = 0;
    } else if (nonzero > kMaxProduct / dim) {
      return Corrupt(origin, absl::StrCat("tensor '", name, "': shape ", shape.dump(),
                                          " overflows 64-bit sizes"));
    } else {
      nonzero *= dim;
      numel *= dim;
    }
    t.shape.push_back(d.get<int64_t>());
  }
  if (numel > data_size / sizeof(float)) {
    return Corrupt(
        origin, absl::StrCat("tensor '", name, "': shape ", shape.dump(), " needs more than the ",
                             data_size, " data bytes in the file"));
  }
  const auto& off = entry["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
      !off[1].is_number_unsigned()) {
    return Corrupt(origin, absl::StrCat("tensor '", name, "': bad data_offsets"));
  }
  const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  const uint64_t want = numel * sizeof(float);
  if (begin > end || end > data_size || end - begin != want) {
    return Corrupt(origin,
                   absl::StrCat("tensor '", name, "': data_offsets [", begin, ", ", end,
                                ") do not fit ", data_size, " data bytes / ", want, " expected"));
  }
  t.values.resize(static_cast<size_t>(numel));
  // An empty tensor has no buffer: memcpy from/to null is undefined even for 0 bytes
  // (found by safetensors_fuzzer).
  if (want > 0) std::memcpy(t.values.data(), data + begin, want);
  return t;
}

}  // namespace

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string EncodeSafetensors(const std::vector<TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorView*> sorted;
  for (const TensorView& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorView* a, const TensorView* b) { return a->name < b->name; });
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const TensorView* t : sorted) {
    const uint64_t bytes = static_cast<uint64_t>(NumElements(t->shape)) * sizeof(float);
    header[t->name] = {
        {"dtype", "F32"}, {"shape", t->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keep tensor data 8-byte aligned
  std::string out(8, '\0');
  const uint64_t len = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((len >> (8 * i)) & 0xff);
  out += json;
  out.reserve(out.size() + offset);
  for (const TensorView* t : sorted) {
    out.append(reinterpret_cast<const char*>(t->data),
               static_cast<size_t>(NumElements(t->shape)) * sizeof(float));
  }
  return out;
}

absl::StatusOr<SafetensorsContents> DecodeSafetensors(const std::string& bytes,
                                                      const std::string& origin) {
  if (bytes.size() < 8) return Corrupt(origin, "file shorter than the 8-byte header length");
  uint64_t len = 0;
  for (int i = 0; i < 8; ++i)
    len |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  if (len > bytes.size() - 8) return Corrupt(origin, "header length exceeds the file size");
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, len), nullptr, false);
  if (header.is_discarded() || !header.is_object()) {
    return Corrupt(origin, "header is not a JSON object");
  }
  SafetensorsContents out;
  const char* data = bytes.data() + 8 + len;
  const uint64_t data_size = bytes.size() - 8 - len;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      // iterator::key() throws on a non-object (found by safetensors_fuzzer's corpus).
      if (!it->is_object()) return Corrupt(origin, "__metadata__ is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (m->is_string()) out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    ASSIGN_OR_RETURN(out.tensors[it.key()], DecodeEntry(it.key(), *it, data, data_size, origin));
  }
  return out;
}

absl::StatusOr<SafetensorsContents> ReadSafetensorsPath(const std::string& path) {
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
      if (entry.path().extension() == ".safetensors") files.push_back(entry.path().string());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) return absl::NotFoundError(absl::StrCat(path, ": no *.safetensors files"));
  } else {
    files.push_back(path);
  }
  SafetensorsContents all;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(f));
    ASSIGN_OR_RETURN(SafetensorsContents one, DecodeSafetensors(bytes, f));
    for (auto& [name, tensor] : one.tensors) {
      if (all.tensors.count(name)) {
        return absl::InvalidArgumentError(absl::StrCat(f, ": tensor '", name, "' repeated"));
      }
      all.tensors[name] = std::move(tensor);
    }
    all.metadata.insert(one.metadata.begin(), one.metadata.end());
  }
  return all;
}

}  // namespace xhc
