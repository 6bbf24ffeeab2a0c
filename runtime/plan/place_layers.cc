// SplitLayers / PlaceLayers: which layers each pipeline stage holds, evenly by default or
// with the first and last stage pinned (pipeline.first_stage_layers / last_stage_layers).
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "runtime/common/config_reader.h"
#include "runtime/plan/plan.h"

namespace xhc::plan {
namespace {

// The end stages' pinned layer counts, as the config gave them (a stage count of one has no
// ends to make uneven: its only stage holds every layer).
struct PinnedEnds {
  std::optional<int> first, last;
  int count() const { return (first ? 1 : 0) + (last ? 1 : 0); }
  int sum() const { return first.value_or(0) + last.value_or(0); }
  // "pipeline.first_stage_layers" / "pipeline.first_stage_layers, pipeline.last_stage_layers"
  std::string Keys() const {
    std::vector<std::string> keys;
    if (first) keys.push_back("pipeline.first_stage_layers");
    if (last) keys.push_back("pipeline.last_stage_layers");
    return absl::StrJoin(keys, ", ");
  }
  // "pipeline.first_stage_layers = 1 and pipeline.last_stage_layers = 3"
  std::string Values() const {
    std::vector<std::string> parts;
    if (first) parts.push_back(absl::StrCat("pipeline.first_stage_layers = ", *first));
    if (last) parts.push_back(absl::StrCat("pipeline.last_stage_layers = ", *last));
    return absl::StrJoin(parts, " and ");
  }
};

// Refuses pinned ends that leave a stage without layers, leave layers without a stage, or
// cut an xhc_flash window pair (`unit` layers stay together).
absl::Status CheckPinnedEnds(const PinnedEnds& ends, int num_layers, int num_stages, int unit,
                             const std::string& where) {
  for (const auto& [value, key] : {std::pair{ends.first, "pipeline.first_stage_layers"},
                                   std::pair{ends.last, "pipeline.last_stage_layers"}}) {
    if (value && *value % unit != 0) {
      return InvalidKey(key, absl::StrCat(*value, " is not a multiple of ", unit,
                                          ": model.residual.window 4 keeps layer pairs in one "
                                          "stage; use an even number"));
    }
    if (value && *value < 0) return InvalidKey(key, absl::StrCat(*value, " must be >= 0"));
  }
  const int left = num_layers - ends.sum();
  const int num_free = num_stages - ends.count();
  const bool one = ends.count() == 1;  // for the verbs: "... = 7 leaves", "... and ... leave"
  if (left < 0) {
    return InvalidKey(ends.Keys(), absl::StrCat(ends.Values(), one ? " exceeds" : " exceed",
                                                " model.n_layers = ", num_layers));
  }
  if (num_free == 0 && left > 0) {
    return InvalidKey(ends.Keys(),
                      absl::StrCat(ends.Values(), one ? " holds " : " hold ", ends.sum(),
                                   " of model.n_layers = ", num_layers, " layers, but ", where,
                                   " has only these 2 stages: no middle stage takes the other ",
                                   left, "; make them add up to ", num_layers));
  }
  if (left < num_free * unit) {
    return InvalidKey(
        ends.Keys(),
        absl::StrCat(
            ends.Values(), one ? " leaves " : " leave ", left, " of model.n_layers = ", num_layers,
            " layers for the ", num_free, " other stages of ", where,
            ": a middle stage would be empty (each needs ", unit == 1 ? "a layer" : "a layer pair",
            "); lower ", ends.Keys(),
            ", use more model.n_layers, or fewer stages (pipeline.workers, pipeline.chunks)"));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<model::StageSpec> SplitLayers(int num_layers, int num_stages, std::optional<int> first,
                                          std::optional<int> last) {
  std::vector<int> counts(num_stages, -1);  // -1: not pinned
  int left = num_layers;
  if (num_stages > 1 && first) counts.front() = *first, left -= *first;
  if (num_stages > 1 && last) counts.back() = *last, left -= *last;
  // The free stages nearest the middle take the remainder: the ends also carry the
  // embedding and the head.
  std::vector<int> order;
  for (int s = 0; s < num_stages; ++s) {
    if (counts[s] < 0) order.push_back(s);
  }
  const double mid = (num_stages - 1) / 2.0;
  std::stable_sort(order.begin(), order.end(),
                   [mid](int a, int b) { return std::abs(a - mid) < std::abs(b - mid); });
  const int num_free = static_cast<int>(order.size());
  for (int s : order) counts[s] = left / num_free;
  for (int i = 0; num_free > 0 && i < left % num_free; ++i) ++counts[order[i]];
  std::vector<model::StageSpec> specs;
  int next = 0;
  for (int s = 0; s < num_stages; ++s) {
    specs.push_back({next, counts[s], s == 0, s == num_stages - 1});
    next += counts[s];
  }
  return specs;
}

absl::Status PlaceLayers(const Config& config, int workers, JobPlan& plan) {
  const int num_stages = plan.schedule.num_stages, num_layers = config.model.n_layers;
  const std::string where = absl::StrCat(plan.schedule.type, " on ", workers, " workers");
  // xhc_flash with window 4 shares one routing decision across two layers: stages hold whole
  // layer pairs, so no window straddles a stage boundary (spec 4.5).
  const ResidualConfig& res = config.model.residual;
  const int unit = res.type == ResidualType::kXhcFlash ? res.window / 2 : 1;
  PinnedEnds ends;
  if (num_stages > 1) {
    ends = {config.pipeline.first_stage_layers, config.pipeline.last_stage_layers};
  }
  if (ends.count() > 0) {
    RETURN_IF_ERROR(CheckPinnedEnds(ends, num_layers, num_stages, unit, where));
  } else if (num_stages > num_layers) {
    return InvalidKey(
        "model.n_layers",
        absl::StrCat(num_layers, " layers cannot fill ", num_stages, " pipeline stages (", where,
                     "); use more layers, fewer pipeline.workers, or let an end stage hold none "
                     "(pipeline.first_stage_layers / last_stage_layers: 0)"));
  } else if (num_stages * unit > num_layers) {
    return InvalidKey("model.residual.window",
                      absl::StrCat(res.window, " keeps ", unit, " layers together, so ", num_layers,
                                   " layers give at most ", num_layers / unit,
                                   " pipeline stages, but ", where, " needs ", num_stages,
                                   "; use window: 2, more model.n_layers, or fewer "
                                   "pipeline.workers"));
  }
  auto in_units = [unit](std::optional<int> v) -> std::optional<int> {
    return v ? std::optional<int>(*v / unit) : std::nullopt;
  };
  plan.stages =
      SplitLayers(num_layers / unit, num_stages, in_units(ends.first), in_units(ends.last));
  for (model::StageSpec& s : plan.stages) s.first_layer *= unit, s.num_layers *= unit;
  return absl::OkStatus();
}

std::string DescribeStageLayers(const JobPlan& plan, const std::vector<int>& stages) {
  std::vector<int> counts;
  for (int s : stages) counts.push_back(plan.stages[s].num_layers);
  return absl::StrJoin(counts, ", ");
}

}  // namespace xhc::plan
