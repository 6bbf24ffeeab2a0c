#include "runtime/control/dashboard/state_json.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace xhc::dashboard {
namespace {

using nlohmann::json;

json StepJson(const controller::StepRecord& s) {
  return {{"step", s.step},
          {"generation", s.generation},
          {"wall_time", s.wall_time},
          {"loss", s.loss},
          {"val_loss", s.val_loss ? json(*s.val_loss) : json(nullptr)},
          {"grad_norm", s.grad_norm},
          {"step_s", s.step_s},
          {"tokens_per_s", s.tokens_per_s},
          {"microbatch_losses", s.microbatch_losses},
          {"exposed_comm", s.exposed_comm},
          {"peer_wait", s.peer_wait},
          {"bubble", s.bubble},
          {"other_cpu", s.other_cpu},
          {"peak_rss_mb", s.peak_rss_mb}};
}

json CheckpointJson(const controller::CheckpointRecord& c) {
  return {{"step", c.step},       {"wall_time", c.wall_time},
          {"bytes", c.bytes},     {"snapshot_stall_s", c.snapshot_stall_s},
          {"write_s", c.write_s}, {"commit_latency_s", c.commit_latency_s},
          {"async", c.async}};
}

json RecoveryJson(const controller::RecoveryRecord& r) {
  return {{"generation", r.generation},
          {"wall_time", r.wall_time},
          {"failed_step", r.failed_step},
          {"resumed_step", r.resumed_step},
          {"replaced_ranks", r.replaced_ranks},
          {"reason", r.reason},
          {"seconds", r.seconds}};
}

json WorkerJson(const controller::WorkerView& w) {
  return {{"rank", w.rank},
          {"worker_id", w.worker_id},
          {"host", w.host},
          {"pid", w.pid},
          {"health", w.health},
          {"heartbeat_age_s", w.heartbeat_age_s},
          {"actions_done", w.actions_done},
          {"step", w.step},
          {"epoch", w.epoch}};
}

json TimelineJson(const controller::JobView& v) {
  json spans = json::array();
  double t0 = 0;
  if (!v.last_step_spans.empty()) {
    t0 = v.last_step_spans[0].start_us();
    for (const proto::Span& s : v.last_step_spans) t0 = std::min(t0, s.start_us());
  }
  for (size_t i = 0; i < v.last_step_spans.size(); ++i) {
    const proto::Span& s = v.last_step_spans[i];
    spans.push_back({{"rank", v.last_step_span_ranks[i]},
                     {"track", s.track()},
                     {"name", s.name()},
                     {"start_us", s.start_us() - t0},
                     {"dur_us", s.dur_us()}});
  }
  return {{"step", v.spans_step}, {"spans", spans}};
}

}  // namespace

std::string StateJson(const controller::JobView& v) {
  json doc;
  doc["job"] = {{"id", v.job_id},
                {"state", v.state},
                {"schedule", v.schedule},
                {"residual", v.residual},
                {"workers", v.num_workers},
                {"stages", v.num_stages},
                {"generation", v.generation},
                {"restarts", v.restarts},
                {"max_restarts", v.max_restarts},
                {"step", v.step},
                {"total_steps", v.total_steps},
                {"heartbeat_timeout_s", v.heartbeat_timeout_s}};
  doc["workers"] = json::array();
  for (const controller::WorkerView& w : v.workers) doc["workers"].push_back(WorkerJson(w));
  doc["steps_from"] = v.steps_from;
  doc["num_steps"] = v.num_steps_recorded;
  doc["steps"] = json::array();
  for (const controller::StepRecord& s : v.steps) doc["steps"].push_back(StepJson(s));
  doc["checkpoints_from"] = v.checkpoints_from;
  doc["num_checkpoints"] = v.num_checkpoints_recorded;
  doc["checkpoints"] = json::array();
  for (const controller::CheckpointRecord& c : v.checkpoints) {
    doc["checkpoints"].push_back(CheckpointJson(c));
  }
  doc["recoveries"] = json::array();
  for (const controller::RecoveryRecord& r : v.recoveries) {
    doc["recoveries"].push_back(RecoveryJson(r));
  }
  doc["timeline"] = TimelineJson(v);
  // Replace, not throw, on bytes that are not UTF-8 (a worker id or failure message).
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace xhc::dashboard
