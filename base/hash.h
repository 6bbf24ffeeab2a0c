#ifndef XHC_BASE_HASH_H_
#define XHC_BASE_HASH_H_

#include <cstdint>

namespace xhc {

// SplitMix64: a fast, well-mixed, portable 64-bit hash. Data order, parameter init, sampling
// and job ids all derive from it, so it must give the same bits on every machine.
uint64_t Mix64(uint64_t x);

}  // namespace xhc

#endif  // XHC_BASE_HASH_H_
