#ifndef XHC_KERNELS_CPU_XHC_XHC_OPS_BY_TYPE_H_
#define XHC_KERNELS_CPU_XHC_XHC_OPS_BY_TYPE_H_

// The xHC residual ops of xhc_ops.h under one name for every scalar type: a float call runs
// the fused kernels (xhc_ops.h), a call on any other type (the double model that checks
// gradients by finite differences) the reference (xhc_reference.h), with the same call
// sequence and contract. The using-declarations put each reference template beside its
// optimized overload; for float arguments the non-template is an exact match and wins, so
// the two signatures must stay identical with R = float.

#include "kernels/cpu/xhc/xhc_ops.h"
#include "kernels/cpu/xhc/xhc_reference.h"

namespace xhc::kernels {

using ref::ExpandBackward;
using ref::ExpandForward;
using ref::HeadReduceBackwardInput;
using ref::HeadReduceBackwardWeights;
using ref::HeadReduceForward;
using ref::XhcBackwardInput;
using ref::XhcBackwardInputRestoring;
using ref::XhcBackwardOut;
using ref::XhcBackwardWeights;
using ref::XhcPost;
using ref::XhcPre;

}  // namespace xhc::kernels

#endif  // XHC_KERNELS_CPU_XHC_XHC_OPS_BY_TYPE_H_
