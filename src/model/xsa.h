// Exclusive Self Attention (arXiv 2603.09078). Standard attention returns
// y_i = sum_j a_ij v_j, which tends to point along the token's own value v_i.
// XSA removes that component, per head, before the output projection:
//
//     z_i = y_i - (y_i . v^_i) v^_i,      v^_i = v_i / max(||v_i||, eps)
//
// so z_i is orthogonal to v_i and attention carries only information from
// other tokens. No parameters. Under bf16 autocast the projection is computed
// in float32: the subtraction cancels most of y_i and bf16 would lose it.
//
// Gated variant: z_i = y_i - g (y_i . v^_i) v^_i with g = tanh(alpha) per head,
// alpha learned (g = 0 is SA, g = 1 is XSA).
//
// exclude_self_value is a custom autograd function. It saves only its inputs y
// and v, which attention's backward keeps anyway, and recomputes the row dot
// products in backward. Composed of ordinary ops, autograd would also keep v^
// (and, under bf16, float32 copies of y and v): up to three extra float32 tensors
// of y's size per layer. With g = dL/dz, a = g.v^, s = y.v^, n = max(||v||, eps):
//
//     dL/dy = g - gate a v^
//     dL/dv = gate (2 a s v^ - a y - s g) / n     (the v^ v^T part drops out while
//                                                   ||v|| > eps; below, n is constant)
//     dL/dgate = -sum a s                         (over the dims gate broadcasts over)
//
// (xsa.cpp evaluates these in terms of v rather than v^, in fewer passes.)
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// alpha at which a gated layer starts as XSA: tanh(alpha) rounds to exactly 1 in
// float32 for alpha > 13 ln 2 = 9.01 (1 - tanh < 2^-25); just past that point the
// gradient, sech^2(alpha) ~ 4e-8 taken in float64, is not yet zero.
inline constexpr double kXsaGateInitXsa = 9.25;

// y, v: (..., head_dim), same shape. gate: undefined (plain XSA) or a tensor
// that broadcasts against y.v^, e.g. (n_head, 1, 1) for y of shape (B, H, T, D).
// Returns z in y's dtype.
torch::Tensor exclude_self_value(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                 const torch::Tensor& gate = {});

// The same function whose forward and backward run as two fused CUDA kernels
// (kernels/xsa_cuda.h) when y is on a CUDA device and the build has them; elsewhere
// exactly exclude_self_value. Selected by train.kernels "xsa" (the default on CUDA);
// `wide` (train.kernels "xsa_wide") lets the kernels move 16-byte vectors.
torch::Tensor exclude_self_value_fused(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                       const torch::Tensor& gate = {}, bool wide = false);

// The same map written with ordinary differentiable ops: the reference the custom
// backward is tested against, and the "before" that `xsagpt bench` measures.
torch::Tensor exclude_self_value_autograd(const torch::Tensor& y, const torch::Tensor& v, double eps,
                                          const torch::Tensor& gate = {});

}  // namespace xsagpt
