#include "runtime/control/dashboard/prometheus_text.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xhc::dashboard {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// Label values escape backslash, double quote and newline (the format's only escapes).
std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return absl::StrFormat("%.17g", v);
}

// One metric family: HELP and TYPE once, then its samples.
class Family {
 public:
  Family(std::string* out, const std::string& name, const std::string& type,
         const std::string& help)
      : out_(out), name_(name) {
    absl::StrAppend(out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  Family& Add(double value, const Labels& labels = {}) {
    absl::StrAppend(out_, name_);
    if (!labels.empty()) {
      absl::StrAppend(out_, "{");
      for (size_t i = 0; i < labels.size(); ++i) {
        absl::StrAppend(out_, i ? "," : "", labels[i].first, "=\"", Escape(labels[i].second), "\"");
      }
      absl::StrAppend(out_, "}");
    }
    absl::StrAppend(out_, " ", Number(value), "\n");
    return *this;
  }

 private:
  std::string* out_;
  std::string name_;
};

Labels Rank(int r) { return {{"rank", absl::StrCat(r)}}; }

void JobFamilies(const controller::JobView& v, std::string* out) {
  Family(out, "xhc_job_info", "gauge", "The job: id, schedule and residual type (always 1).")
      .Add(1, {{"job_id", v.job_id}, {"schedule", v.schedule}, {"residual", v.residual}});
  Family state(out, "xhc_job_state", "gauge", "1 for the job's current state, 0 for the others.");
  const std::string now = v.state.substr(0, v.state.find(':'));
  for (const char* s : {"waiting for workers", "running", "recovering", "finished", "failed"}) {
    state.Add(now == s ? 1 : 0, {{"state", s}});
  }
  Family(out, "xhc_step", "gauge", "Steps done: the newest step's number (1-based).").Add(v.step);
  Family(out, "xhc_total_steps", "gauge", "Steps the job will run.").Add(v.total_steps);
  Family(out, "xhc_generation", "gauge",
         "Recovery generation: bumps each time the job rolls back to a checkpoint.")
      .Add(v.generation);
  Family(out, "xhc_worker_restarts_total", "counter",
         "Worker processes replaced after a death or hang.")
      .Add(v.restarts);
  Family(out, "xhc_recoveries_total", "counter", "Completed recoveries (rollbacks).")
      .Add(static_cast<double>(v.recoveries.size()));
  Family(out, "xhc_steps_run_total", "counter",
         "Steps run, counting a step re-run after a rollback again.")
      .Add(static_cast<double>(v.num_steps_recorded));
}

void StepFamilies(const controller::StepRecord& s, std::string* out) {
  Family(out, "xhc_loss", "gauge", "Training loss of the newest step (mean of its micro-batches).")
      .Add(s.loss);
  if (s.val_loss) {
    Family(out, "xhc_val_loss", "gauge", "Validation loss of the newest step that evaluated.")
        .Add(*s.val_loss);
  }
  Family(out, "xhc_grad_norm", "gauge", "Gradient norm of the newest step.").Add(s.grad_norm);
  Family(out, "xhc_step_seconds", "gauge", "Wall time of the newest step.").Add(s.step_s);
  Family(out, "xhc_tokens_per_second", "gauge", "Training tokens per second of the newest step.")
      .Add(s.tokens_per_s);
  Family exposed(out, "xhc_exposed_comm_ratio", "gauge",
                 "Fraction of the newest step a rank waited on transfers whose data existed.");
  for (size_t r = 0; r < s.exposed_comm.size(); ++r) exposed.Add(s.exposed_comm[r], Rank(r));
  Family peer(out, "xhc_peer_wait_ratio", "gauge",
              "Fraction of the newest step a rank waited on peers still computing.");
  for (size_t r = 0; r < s.peer_wait.size(); ++r) peer.Add(s.peer_wait[r], Rank(r));
  Family bubble(out, "xhc_bubble_ratio", "gauge",
                "Fraction of the newest step a rank was not computing.");
  for (size_t r = 0; r < s.bubble.size(); ++r) bubble.Add(s.bubble[r], Rank(r));
  Family other(out, "xhc_other_cpu_ratio", "gauge",
               "CPU time of a rank's threads besides its compute (transport, RPC) over the "
               "newest step.");
  for (size_t r = 0; r < s.other_cpu.size(); ++r) other.Add(s.other_cpu[r], Rank(r));
  Family rss(out, "xhc_worker_peak_rss_bytes", "gauge", "Peak resident memory of a rank.");
  for (size_t r = 0; r < s.peak_rss_mb.size(); ++r) rss.Add(s.peak_rss_mb[r] * 1048576.0, Rank(r));
}

void CheckpointFamilies(const controller::JobView& v, std::string* out) {
  Family(out, "xhc_checkpoints_total", "counter", "Checkpoints committed.")
      .Add(static_cast<double>(v.num_checkpoints_recorded));
  if (v.checkpoints.empty()) return;
  const controller::CheckpointRecord& c = v.checkpoints.back();
  Family(out, "xhc_checkpoint_step", "gauge", "Step of the newest committed checkpoint.")
      .Add(c.step);
  Family(out, "xhc_checkpoint_bytes", "gauge", "Size of the newest checkpoint's shards.")
      .Add(c.bytes);
  Family(out, "xhc_checkpoint_snapshot_stall_seconds", "gauge",
         "Newest checkpoint: the slowest rank's copy on its compute thread.")
      .Add(c.snapshot_stall_s);
  Family(out, "xhc_checkpoint_write_seconds", "gauge",
         "Newest checkpoint: the slowest rank's shard write and fsync.")
      .Add(c.write_s);
  Family(out, "xhc_checkpoint_commit_latency_seconds", "gauge",
         "Newest checkpoint: from the request to the commit.")
      .Add(c.commit_latency_s);
}

void WorkerFamilies(const controller::JobView& v, std::string* out) {
  Family info(out, "xhc_worker_info", "gauge",
              "A rank's worker: host, worker id and health (always 1).");
  for (const controller::WorkerView& w : v.workers) {
    info.Add(1, {{"rank", absl::StrCat(w.rank)},
                 {"host", w.host},
                 {"worker_id", w.worker_id},
                 {"health", w.health}});
  }
  Family up(out, "xhc_worker_up", "gauge", "1 while a rank's worker is alive and beating.");
  for (const controller::WorkerView& w : v.workers) up.Add(w.health == "alive", Rank(w.rank));
  Family age(out, "xhc_worker_heartbeat_age_seconds", "gauge",
             "Seconds since a rank's last heartbeat.");
  for (const controller::WorkerView& w : v.workers) age.Add(w.heartbeat_age_s, Rank(w.rank));
  Family step(out, "xhc_worker_step", "gauge", "The last step a rank reported done.");
  for (const controller::WorkerView& w : v.workers) step.Add(w.step, Rank(w.rank));
}

}  // namespace

std::string PrometheusText(const controller::JobView& v) {
  std::string out;
  JobFamilies(v, &out);
  if (!v.steps.empty()) StepFamilies(v.steps.back(), &out);
  CheckpointFamilies(v, &out);
  WorkerFamilies(v, &out);
  return out;
}

}  // namespace xhc::dashboard
