#ifndef XHC_RUNTIME_MODEL_PARAMS_H_
#define XHC_RUNTIME_MODEL_PARAMS_H_

// Parameters addressed by the global names of model-spec.md section 7. A stage (any
// contiguous range of layers, plus the embedding on the first stage and head_hc /
// final_norm / lm_head on the last) builds exactly its own tensors; initialisation depends
// only on (seed, name), so the same seed gives bit-identical weights whatever the range.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/nn/adamw.h"
#include "runtime/common/config.h"

namespace xhc::model {

struct StageSpec {
  int first_layer = 0;
  int num_layers = 0;
  bool has_embed = false;  // embedding + expand
  bool has_head = false;   // head_hc reduce + final_norm + lm_head + loss

  static StageSpec Full(const ModelConfig& cfg) { return {0, cfg.n_layers, true, true}; }
};

template <typename T>
struct ParamT {
  std::string name;
  std::vector<int64_t> shape;  // [] for scalars
  bool decay = false;          // AdamW weight decay (rank-2 matrices except embed.weight)
  std::vector<T> value;
  std::vector<T> grad;           // after FinalizeGrads: the step's gradient (sum over
                                 // micro-batches); during a step: one micro-batch's scratch
  std::vector<double> grad_acc;  // the step's running sum, in double (see FinalizeGrads)
  std::vector<T> exp_avg;        // AdamW moments (allocated on the first step or on load)
  std::vector<T> exp_avg_sq;

  int64_t numel() const { return static_cast<int64_t>(value.size()); }
};

// A piece of one parameter, at most kParamPieceElements long: the unit the per-step sweeps
// (zeroing, accumulating, the gradient norm, the optimizer) hand to the threads, all of a
// stage's tensors in one parallel region. A stage has hundreds of tensors, most of them small
// (biases, scalars, norms), and a parallel region per tensor cost more than the sweep itself
// at the quickstart's size. The length is the gradient norm's block, so the norm summed from
// pieces is the same number as tensor by tensor (docs/design/optimizer-and-gradient-sweeps.md).
inline constexpr int64_t kParamPieceElements = nn::kSumOfSquaresBlock;

template <typename T>
struct ParamPiece {
  ParamT<T>* param;
  int64_t begin;
  int64_t end;
};

template <typename T>
class ParamSetT {
 public:
  ParamT<T>* Add(const std::string& name, std::vector<int64_t> shape, bool decay);
  // nullptr when absent.
  ParamT<T>* Find(const std::string& name) const;
  const std::vector<std::unique_ptr<ParamT<T>>>& all() const { return params_; }
  // Zeroes grad and starts grad_acc's sum (start of a step). grad_acc itself is not filled:
  // the step's first AccumulateGrads writes it (0.0 + grad, the same bits as adding to a
  // zero), which saves a fill and a read of 8 bytes per parameter every step.
  void ZeroGrads();
  // Adds every grad into grad_acc (double), then zeroes grad: called after each micro-batch's
  // weight-gradient pass. Summing micro-batches in double makes the step's gradient
  // independent of the order in which micro-batches finish (a DualPipe mirror pair sums its
  // two halves in a different order than single-process training): rounded back to float,
  // the sums agree bit for bit in practice.
  void AccumulateGrads();
  // AccumulateGrads a group at a time, for a weight pass that finishes its parameters'
  // gradients one part after another (StageModelT::BackwardWeight with a ParamsDone): the
  // same sums, bit for bit. Every parameter goes through AccumulateGroup exactly once, then
  // EndGroupedAccumulation closes the pass as AccumulateGrads would.
  void AccumulateGroup(const std::vector<ParamT<T>*>& group);
  void EndGroupedAccumulation() { acc_started_ = true; }
  // grad = float(grad_acc): the step's gradient, ready for the norm and the optimizer.
  void FinalizeGrads();
  // Makes grad_acc hold the step's sum as it stands (zeros if no micro-batch ran since
  // ZeroGrads): call before reading or adding to grad_acc directly (the gradient exchanges).
  void MaterializeSums();
  // Every parameter cut into pieces, in canonical order (a tensor's pieces in element order).
  const std::vector<ParamPiece<T>>& pieces() const { return pieces_; }

 private:
  std::vector<std::unique_ptr<ParamT<T>>> params_;  // canonical order (stable addresses)
  std::vector<ParamPiece<T>> pieces_;
  std::map<std::string, ParamT<T>*> by_name_;
  bool acc_started_ = true;  // false from ZeroGrads to the step's first AccumulateGrads
};

// Creates the stage's parameters (zero values) in canonical order.
template <typename T>
ParamSetT<T> BuildStageParams(const ModelConfig& cfg, const StageSpec& spec);

// Spec section 5 initialisation from (seed, name) only.
template <typename T>
void InitParams(const ModelConfig& cfg, uint64_t seed, ParamSetT<T>* params);

// The residual-map prefix of a sublayer: "layers.3.mlp_hc.".
std::string HcPrefix(int layer, bool is_mlp);

extern template class ParamSetT<float>;
extern template class ParamSetT<double>;

}  // namespace xhc::model

#endif  // XHC_RUNTIME_MODEL_PARAMS_H_
