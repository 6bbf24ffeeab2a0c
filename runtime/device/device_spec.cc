#include "runtime/device/device_spec.h"

#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/device/host_device.h"

namespace xhc::device {
namespace {

constexpr char kForms[] = "cpu, host, host:SEED or cuda:N";
constexpr int64_t kHostDelayUs = 200;

struct Parsed {
  enum Kind { kCpu, kHost, kCuda } kind = kCpu;
  bool delays = false;
  uint64_t seed = 0;
  int gpu = 0;
};

absl::StatusOr<Parsed> Parse(const std::string& spec) {
  Parsed p;
  if (spec == "cpu") return p;
  if (spec == "host") {
    p.kind = Parsed::kHost;
    return p;
  }
  if (absl::StartsWith(spec, "host:")) {
    p.kind = Parsed::kHost;
    p.delays = true;
    if (!absl::SimpleAtoi(spec.substr(5), &p.seed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device ", spec, ": the seed after host: must be a number"));
    }
    return p;
  }
  if (absl::StartsWith(spec, "cuda:")) {
    p.kind = Parsed::kCuda;
    if (!absl::SimpleAtoi(spec.substr(5), &p.gpu) || p.gpu < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device ", spec, ": cuda:N takes a GPU index N >= 0"));
    }
    return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device ", spec, ": not a device (", kForms, ")"));
}

}  // namespace

absl::Status CheckDeviceSpec(const std::string& spec) {
  absl::StatusOr<Parsed> p = Parse(spec);
  if (!p.ok()) return p.status();
  if (p->kind == Parsed::kCuda) {
    return absl::UnimplementedError(absl::StrCat(
        "--device ", spec,
        ": no CUDA device yet. The CUDA kernels (kernels/cuda) and the executor's stream path "
        "(runtime/device, run here on the host device: --device host) exist; the CUDA device "
        "and a model whose stages live on it do not"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Device>> MakeDevice(const std::string& spec) {
  if (absl::Status s = CheckDeviceSpec(spec); !s.ok()) return s;
  const Parsed p = *Parse(spec);
  if (p.kind == Parsed::kCpu) return std::unique_ptr<Device>();
  HostDeviceOptions o;
  o.seed = p.seed;
  o.max_delay_us = p.delays ? kHostDelayUs : 0;
  return std::unique_ptr<Device>(std::make_unique<HostDevice>(o));
}

}  // namespace xhc::device
