#ifndef XHC_TESTS_FAULT_FAULT_JOB_H_
#define XHC_TESTS_FAULT_FAULT_JOB_H_

// The job the fault tests break and the helpers that find and watch its processes.

#include <string>
#include <vector>

namespace xhc::testing {

// Writes dir/corpus.txt (once) and dir/SCHEDULE.yaml: a 2-worker job of `steps` steps that
// checkpoints every 10 steps, with a 1.5 s heartbeat timeout and `max_restarts`.
std::string FaultJobConfig(const std::string& dir, const std::string& schedule, int steps,
                           int max_restarts = 10);

// pids of the running `xhc worker` children of the job in `run` (found by its token path).
std::vector<int> WorkerPids(const std::string& run);

// Waits (up to 30 s) until the job in `run` has logged step `step`; false on time-out.
[[nodiscard]] bool WaitForStep(const std::string& run, int step);

// Waits (up to 10 s) for a live worker of the job (a replacement may still be starting).
std::vector<int> WaitForWorkers(const std::string& run);

}  // namespace xhc::testing

#endif  // XHC_TESTS_FAULT_FAULT_JOB_H_
