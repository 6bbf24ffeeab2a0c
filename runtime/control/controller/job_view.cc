#include "runtime/control/controller/job_view.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/exact_format.h"

namespace xhc::controller {
namespace {

// "0.1234, 0.5678" with `digits` decimals.
std::string Fixed(const std::vector<double>& values, int digits) {
  return absl::StrJoin(values, ", ", [digits](std::string* out, double v) {
    absl::StrAppendFormat(out, "%.*f", digits, v);
  });
}

}  // namespace

std::string MetricsLine(const StepRecord& r) {
  return absl::StrFormat(
      "{\"step\": %d, \"loss\": %.6f, \"grad_norm\": %.6g, \"step_s\": %.4f, "
      "\"tokens_per_s\": %.1f, \"microbatch_losses\": [%s], \"exposed_comm\": [%s], "
      "\"peer_wait\": [%s], \"bubble\": [%s], \"other_cpu\": [%s], \"peak_rss_mb\": [%s]"
      "%s%s}\n",
      r.step, r.loss, r.grad_norm, r.step_s, r.tokens_per_s, ExactList(r.microbatch_losses),
      Fixed(r.exposed_comm, 4), Fixed(r.peer_wait, 4), Fixed(r.bubble, 4), Fixed(r.other_cpu, 4),
      Fixed(r.peak_rss_mb, 1),
      r.replica_grad_wait_s.empty()
          ? ""
          : absl::StrCat(", \"replica_grad_wait_s\": [", Fixed(r.replica_grad_wait_s, 6), "]"),
      r.val_loss ? absl::StrFormat(", \"val_loss\": %.6f", *r.val_loss) : "");
}

std::string MetricsLine(const CheckpointRecord& r) {
  return absl::StrFormat(
      "{\"checkpoint_step\": %d, \"bytes\": %d, \"snapshot_stall_s\": %.6f, \"write_s\": %.6f, "
      "\"commit_latency_s\": %.6f, \"async\": %s}\n",
      r.step, r.bytes, r.snapshot_stall_s, r.write_s, r.commit_latency_s,
      r.async ? "true" : "false");
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace xhc::controller
