#ifndef XHC_TESTS_LAUNCH_TINY_JOB_H_
#define XHC_TESTS_LAUNCH_TINY_JOB_H_

#include <string>

namespace xhc::testing {

// Writes a corpus and a small xhc job config (2 pipeline workers, `steps` steps, d_model
// 16) under `dir`; returns the config's path. Seconds to train on 2 cores.
std::string WriteTinyJob(const std::string& dir, int steps);

}  // namespace xhc::testing

#endif  // XHC_TESTS_LAUNCH_TINY_JOB_H_
