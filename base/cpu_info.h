#ifndef XHC_BASE_CPU_INFO_H_
#define XHC_BASE_CPU_INFO_H_

// Which CPU a benchmark's figures came from, for the JSON the benchmarks print.

#include <string>

namespace xhc {

// /proc/cpuinfo's first "model name" and its "cpu family" / "model" numbers (Linux x86),
// else "unknown": names the machine a JSON line was measured on (a VM may say only "AMD
// EPYC"; family 25 is Zen 3, 26 Zen 5). JSON-safe: quotes, backslashes and control
// characters dropped.
std::string CpuModelName();

// The same for a given /proc/cpuinfo text (the function above reads the file).
std::string CpuModelNameFrom(const std::string& cpuinfo);

}  // namespace xhc

#endif  // XHC_BASE_CPU_INFO_H_
