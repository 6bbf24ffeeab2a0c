#ifndef XHC_TESTS_UTIL_RUN_UTIL_H_
#define XHC_TESTS_UTIL_RUN_UTIL_H_

// Helpers for integration tests that run the real `xhc` binary as child processes.

#include <map>
#include <string>
#include <vector>

#include "runtime/checkpoint/safetensors.h"

namespace xhc::testing {

// Path of the xhc binary in the test's runfiles.
std::string XhcBinary();

// A fresh directory under TEST_TMPDIR.
std::string FreshDir(const std::string& name);

// Writes `text` to `path`.
void WriteText(const std::string& path, const std::string& text);

// Runs `command` through /bin/sh, output appended to `log`; returns the exit code.
int RunCommand(const std::string& command, const std::string& log);

// Starts `command` through /bin/sh in the background (output appended to `log`); returns
// its pid.
int StartBackground(const std::string& command, const std::string& log);

// Waits up to timeout_s for `pid`; returns its exit code, or -1 if it did not exit (then it
// is killed).
int WaitForExit(int pid, double timeout_s);

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();

// Waits up to timeout_s for `text` to appear in the file at `path`.
bool WaitForText(const std::string& path, const std::string& text, double timeout_s);

// Reads a whole text file ("" when missing).
std::string ReadText(const std::string& path);

// metrics.jsonl rows' "microbatch_losses" arrays, as the exact strings printed.
std::vector<std::string> MicrobatchLosses(const std::string& run_dir);

// Each step's micro-batch losses as the run finally kept them, in step order: a step redone
// after a recovery has two rows in metrics.jsonl, and the later one counts.
std::vector<std::string> CommittedMicrobatchLosses(const std::string& run_dir);

// Tensors of the committed checkpoint of `step` under run_dir/checkpoints.
std::map<std::string, Tensor> CheckpointTensors(const std::string& run_dir, int step);

// Every tensor name and its raw bytes of the step's checkpoint, concatenated: equal strings
// mean bit-identical checkpoints ("" when it cannot be loaded).
std::string CheckpointFingerprint(const std::string& run_dir, int step);

// Copies run directory `from` to `to` as if the job had stopped after the checkpoint of
// `step`: later checkpoints and metrics.jsonl removed, LATEST naming that step. Returns `to`.
std::string CopyRunAsOfStep(const std::string& from, const std::string& to, int step);

// max |a - b| / max(max |a|, 1e-3) over one tensor.
double RelativeDiff(const Tensor& a, const Tensor& b);

}  // namespace xhc::testing

#endif  // XHC_TESTS_UTIL_RUN_UTIL_H_
