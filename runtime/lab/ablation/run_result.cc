// RunResult <-> JSON, the training metrics it is read from, and the interpolation the report's
// equal-FLOPs and equal-wall-clock columns use.
#include <cmath>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "runtime/lab/ablation/ablation.h"

namespace xhc::ablation {

std::string RunResultJson(const RunResult& r) {
  nlohmann::json curve = nlohmann::json::array();
  for (const CurvePoint& p : r.curve) {
    curve.push_back({{"step", p.step}, {"val_loss", p.val_loss}, {"train_s", p.train_s}});
  }
  nlohmann::json j = {
      {"id", r.id},
      {"variant", r.variant},
      {"seed", r.seed},
      {"ok", r.ok},
      {"failure", r.failure},
      {"steps", r.steps},
      {"tokens_per_step", r.tokens_per_step},
      {"flops_per_token", {{"backbone", r.flops.backbone}, {"residual", r.flops.residual}}},
      {"wall_s", r.wall_s},
      {"train_s", r.train_s},
      {"tokens_per_s", r.tokens_per_s},
      {"curve", curve},
      {"diagnostics_failure", r.diagnostics_failure}};
  j["diagnostics"] =
      r.has_diagnostics ? nlohmann::json::parse(DiagnosticsJson(r.diagnostics)) : nlohmann::json();
  return j.dump(1) + "\n";
}

absl::StatusOr<RunResult> ParseRunResultJson(const std::string& text) {
  RunResult r;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    r.id = j.at("id").get<std::string>();
    r.variant = j.at("variant").get<std::string>();
    r.seed = j.at("seed").get<int>();
    r.ok = j.at("ok").get<bool>();
    r.failure = j.at("failure").get<std::string>();
    r.steps = j.at("steps").get<int>();
    r.tokens_per_step = j.at("tokens_per_step").get<double>();
    r.flops.backbone = j.at("flops_per_token").at("backbone").get<double>();
    r.flops.residual = j.at("flops_per_token").at("residual").get<double>();
    r.wall_s = j.at("wall_s").get<double>();
    r.train_s = j.at("train_s").get<double>();
    r.tokens_per_s = j.at("tokens_per_s").get<double>();
    for (const auto& p : j.at("curve")) {
      r.curve.push_back(
          {p.at("step").get<int>(), p.at("val_loss").get<double>(), p.at("train_s").get<double>()});
    }
    r.diagnostics_failure = j.at("diagnostics_failure").get<std::string>();
    if (!j.at("diagnostics").is_null()) {
      auto d = ParseDiagnosticsJson(j.at("diagnostics").dump());
      if (!d.ok()) return d.status();
      r.diagnostics = *std::move(d);
      r.has_diagnostics = true;
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("run result JSON: ", e.what()));
  }
  return r;
}

absl::Status ParseTrainMetrics(const std::string& jsonl, RunResult* r) {
  std::istringstream in(jsonl);
  std::string line;
  double train_s = 0;
  int last = 0;
  r->curve.clear();
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("metrics.jsonl: ", e.what()));
    }
    if (!j.contains("step") || !j.contains("step_s")) continue;  // e.g. checkpoint lines
    last = j["step"].get<int>();
    train_s += j["step_s"].get<double>();
    if (j.contains("val_loss")) r->curve.push_back({last, j["val_loss"].get<double>(), train_s});
  }
  if (r->curve.empty()) return absl::InvalidArgumentError("metrics.jsonl: no val_loss line");
  r->train_s = train_s;
  r->tokens_per_s = train_s > 0 ? r->tokens_per_step * last / train_s : 0;
  if (last != r->steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics.jsonl ends at step ", last, ", not ", r->steps));
  }
  return absl::OkStatus();
}

double AxisValue(const RunResult& r, const CurvePoint& p, Axis axis) {
  switch (axis) {
    case Axis::kSteps: return p.step;
    case Axis::kFlops: return p.step * r.tokens_per_step * r.flops.training();
    case Axis::kSeconds: return p.train_s;
  }
  return 0;
}

double LossAt(const RunResult& r, Axis axis, double x) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (r.curve.empty()) return nan;
  const double eps = 1e-9 * std::max(1.0, std::abs(x));
  for (size_t i = 0; i < r.curve.size(); ++i) {
    const double xi = AxisValue(r, r.curve[i], axis);
    if (std::abs(xi - x) <= eps) return r.curve[i].val_loss;
    if (xi > x) {
      if (i == 0) return nan;
      const double x0 = AxisValue(r, r.curve[i - 1], axis);
      const double f = (x - x0) / (xi - x0);
      return r.curve[i - 1].val_loss + f * (r.curve[i].val_loss - r.curve[i - 1].val_loss);
    }
  }
  return nan;
}

}  // namespace xhc::ablation
