#ifndef XHC_RUNTIME_TRANSPORT_TRANSPORT_TEST_UTIL_H_
#define XHC_RUNTIME_TRANSPORT_TRANSPORT_TEST_UTIL_H_

// Test bodies shared by every Transport implementation (and by the multi-process helper), so
// gloo and the fake are held to the same contract.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "runtime/transport/transport.h"

namespace xhc {

// Every float of a payload names where it came from: sender, receiver, kind, repeat (two
// messages share each tag, checking in-order matching), micro-batch and the element index
// modulo 2^15. The fields fit the 24-bit mantissa, so the value is exact.
float Stamp(int src, int dst, int kind_bit, int repeat, int microbatch_idx, size_t i);

// Each rank posts, in an order shuffled by `seed` + rank, two sends and two receives per
// (peer, kind in {fwd, bwd}, micro-batch) — all in flight at once — then waits on them in a
// second shuffled order and checks every received element. Sizes differ per micro-batch;
// micro-batch 0 carries `large_count` floats (multi-megabyte, to cross engine chunking).
// Returns the first failure (transport error or a misplaced element, named precisely).
// Every rank of the world must call it concurrently with the same arguments but `seed`.
absl::Status RunStampedExchange(Transport& transport, uint32_t seed, int num_microbatches,
                                size_t large_count);

// All ranks call it: several all-reduces (doubles and floats, small and large) and a barrier,
// each checked exactly against the closed-form sum.
absl::Status RunAllReduceChecks(Transport& transport);

}  // namespace xhc

#endif  // XHC_RUNTIME_TRANSPORT_TRANSPORT_TEST_UTIL_H_
