#ifndef XHC_TESTS_LAUNCH_TINY_JOB_H_
#define XHC_TESTS_LAUNCH_TINY_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace xhc::testing {

// Writes a corpus and a small xhc job config (2 pipeline workers, `steps` steps, d_model
// 16) under `dir`; returns the config's path. Seconds to train on 2 cores.
std::string WriteTinyJob(const std::string& dir, int steps);

// The reference every launch test compares against: `xhc train --config config --out
// DIR/single`, then its per-step micro-batch losses (MicrobatchLosses). An error carries the
// training log.
absl::StatusOr<std::vector<std::string>> SingleProcessLosses(const std::string& dir,
                                                             const std::string& config);

}  // namespace xhc::testing

#endif  // XHC_TESTS_LAUNCH_TINY_JOB_H_
