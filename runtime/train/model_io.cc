#include "runtime/train/model_io.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace xhc::train {

std::vector<TensorView> ParamViews(const model::ParamSetT<float>& params, bool with_optim,
                                   std::vector<float>* zeros) {
  int64_t largest = 0;
  for (const auto& p : params.all()) largest = std::max(largest, p->numel());
  if (with_optim) zeros->assign(static_cast<size_t>(largest), 0.0f);
  std::vector<TensorView> views;
  for (const auto& p : params.all()) {
    views.push_back({p->name, p->shape, p->value.data()});
    if (!with_optim) continue;
    const float* m = p->exp_avg.empty() ? zeros->data() : p->exp_avg.data();
    const float* v = p->exp_avg_sq.empty() ? zeros->data() : p->exp_avg_sq.data();
    views.push_back({kExpAvgPrefix + p->name, p->shape, m});
    views.push_back({kExpAvgSqPrefix + p->name, p->shape, v});
  }
  return views;
}

absl::Status LoadParams(const std::map<std::string, Tensor>& tensors, bool with_optim,
                        model::ParamSetT<float>* params) {
  auto check = [&](const std::string& name, const std::vector<int64_t>& shape) -> absl::Status {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      return absl::DataLossError(absl::StrCat("tensor '", name, "' missing from the checkpoint"));
    }
    if (it->second.shape != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' has shape [", absl::StrJoin(it->second.shape, ", "),
                       "], the model expects [", absl::StrJoin(shape, ", "), "]"));
    }
    return absl::OkStatus();
  };
  for (const auto& p : params->all()) {
    absl::Status s = check(p->name, p->shape);
    if (s.ok() && with_optim) s = check(kExpAvgPrefix + p->name, p->shape);
    if (s.ok() && with_optim) s = check(kExpAvgSqPrefix + p->name, p->shape);
    if (!s.ok()) return s;
  }
  for (const auto& p : params->all()) {
    p->value = tensors.at(p->name).values;
    if (!with_optim) continue;
    p->exp_avg = tensors.at(kExpAvgPrefix + p->name).values;
    p->exp_avg_sq = tensors.at(kExpAvgSqPrefix + p->name).values;
  }
  return absl::OkStatus();
}

}  // namespace xhc::train
