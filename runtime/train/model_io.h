#ifndef XHC_RUNTIME_TRAIN_MODEL_IO_H_
#define XHC_RUNTIME_TRAIN_MODEL_IO_H_

// Moves a stage's parameters (and AdamW moments) between memory and checkpoints / safetensors
// files, by global name (model-spec section 7), so any layout can load any checkpoint.

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/model/params.h"

namespace xhc::train {

inline constexpr char kExpAvgPrefix[] = "optim.exp_avg.";
inline constexpr char kExpAvgSqPrefix[] = "optim.exp_avg_sq.";

// Views of every parameter, plus the optimizer moments when `with_optim` (moments not yet
// allocated are written as zeros from `zeros`, which must outlive the views).
std::vector<TensorView> ParamViews(const model::ParamSetT<float>& params, bool with_optim,
                                   std::vector<float>* zeros);

// Copies every parameter of `params` from `tensors` (and the moments when `with_optim`).
// Checks every name and shape FIRST: kDataLoss naming the missing tensor, kInvalidArgument
// naming a tensor whose shape differs; nothing is modified unless everything matches.
absl::Status LoadParams(const std::map<std::string, Tensor>& tensors, bool with_optim,
                        model::ParamSetT<float>* params);

}  // namespace xhc::train

#endif  // XHC_RUNTIME_TRAIN_MODEL_IO_H_
