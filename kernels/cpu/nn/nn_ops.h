#ifndef XHC_KERNELS_CPU_NN_NN_OPS_H_
#define XHC_KERNELS_CPU_NN_NN_OPS_H_

// The transformer ops (model-spec §2, §3), one name each for every scalar type: a float call
// runs the optimized kernel (matmul.h, rmsnorm.h, ...), a call on any other type (the double
// model that checks gradients by finite differences) the naive reference (*_ref.h). The
// using-declarations below put each reference template beside its optimized overload; for
// float arguments the non-template is an exact match and wins, so the two signatures must
// stay identical with T = float (an argument of another type would make the template the
// better match: pass scalars as T).
//
// How a model runs one pre-norm block on n = B*T tokens (u (n,C) the sublayer's input):
//   attention:  RmsnormForward(a, rstd, u, w_norm, n, C, eps)
//               MatmulForward(q|k|v, a, w_q|w_k|w_v, n, C, H*dh | Hkv*dh)
//               RopeForward(q, q, B, T, H, dh, theta), and k with Hkv heads
//               AttentionForward(att, lse, q, k, v, B, T, H, Hkv, dh)
//               MatmulForward(out, att, w_o, n, H*dh, C)
//   MLP:        RmsnormForward, MatmulForward(h1|h3, a, w1|w3, n, C, F),
//               SwigluForward(g, h1, h3, n*F), MatmulForward(out, g, w2, n, F, C)
//   backward, split as the pipeline schedules need it:
//     I  (input gradient, on the critical path): Matmul/Swiglu/Attention/RopeBackward...,
//        MatmulBackwardInput, RmsnormBackwardInput
//     W  (weight gradient, any time later, from the saved activations):
//        MatmulBackwardWeight, RmsnormBackwardWeight (both accumulate into the gradient)
//   the loss:   CrossEntropyForward(&loss, lse, logits, targets, n, V), CrossEntropyBackward
//
// Contract for every op: buffers are caller-allocated, row-major and densely packed; outputs
// do not alias inputs unless the op's header says so. Each returns kInvalidArgument naming
// the op and the argument for a shape it cannot run (shape_check.h), before touching any
// buffer, and OK otherwise. Results are bit-identical for any thread count (each op's header
// says how). Scalar helpers that cannot fail (LrAt, SumOfSquares, ClipCoefficient) return
// their value, and AdamwStepOneThread, which runs inside its caller's parallel region,
// returns nothing: its caller checks first.

#include "kernels/cpu/nn/adamw.h"
#include "kernels/cpu/nn/adamw_ref.h"
#include "kernels/cpu/nn/attention.h"
#include "kernels/cpu/nn/attention_ref.h"
#include "kernels/cpu/nn/cross_entropy.h"
#include "kernels/cpu/nn/cross_entropy_ref.h"
#include "kernels/cpu/nn/matmul.h"
#include "kernels/cpu/nn/matmul_ref.h"
#include "kernels/cpu/nn/rmsnorm.h"
#include "kernels/cpu/nn/rmsnorm_ref.h"
#include "kernels/cpu/nn/rope.h"
#include "kernels/cpu/nn/rope_ref.h"
#include "kernels/cpu/nn/swiglu.h"
#include "kernels/cpu/nn/swiglu_ref.h"

namespace xhc::nn {

using ref::AttentionBackward;
using ref::AttentionForward;
using ref::CrossEntropyBackward;
using ref::CrossEntropyForward;
using ref::MatmulBackwardInput;
using ref::MatmulBackwardWeight;
using ref::MatmulForward;
using ref::RmsnormBackwardInput;
using ref::RmsnormBackwardWeight;
using ref::RmsnormForward;
using ref::RopeBackward;
using ref::RopeForward;
using ref::SwigluBackward;
using ref::SwigluForward;

}  // namespace xhc::nn

#endif  // XHC_KERNELS_CPU_NN_NN_OPS_H_
