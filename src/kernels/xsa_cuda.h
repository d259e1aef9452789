// XSA's step as two fused CUDA kernels, forward and backward (xsa_cuda.cu).
//
// The custom autograd function of xsa.h already saves nothing beyond y and v, but
// written with ATen ops its forward makes about a dozen passes over tensors of
// y's size (float32 copies, two products, two reductions, addcmul, the cast back)
// and its backward more. Each kernel here reads every input once and writes every
// output once, one warp per (batch, head, position) row, in float32 arithmetic
// whatever the storage type. z is laid out like y, as the ATen path's output is:
// flash attention returns y as a transposed view of a (B, T, H, D) buffer, so
// z.transpose(1, 2) stays contiguous and the output projection reads it in place.
//
// The formulas are those of xsa.cpp's ExcludeSelfValue (with n^2 = max(|v|^2, eps^2),
// p = y.v / n^2, q = g.v / n^2, gate gt per head):
//     z  = y - gt p v
//     dy = g - gt q v,    dv = -gt q y - gt p g + [|v|^2 >= eps^2] 2 gt p q v,
//     dgate_row = -p q n^2          (summed over batch and positions by the caller)
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace xsagpt {

// y, v: (B, H, T, D) CUDA tensors of one floating dtype, last dim contiguous;
// gate: undefined or float32 with H elements (one per head). `wide`: 16-byte vector
// accesses where every row is aligned for them (train.kernels "xsa_wide"); else one
// element at a time over a warp per row.
at::Tensor xsa_forward_cuda(const at::Tensor& y, const at::Tensor& v, const at::Tensor& gate, double eps,
                            bool wide = false);

// Returns dy, dv and, with a gate, the per-row gate terms (B, H, T) in float32.
std::tuple<at::Tensor, at::Tensor, at::Tensor> xsa_backward_cuda(const at::Tensor& y, const at::Tensor& v,
                                                                 const at::Tensor& grad_z, const at::Tensor& gate,
                                                                 double eps, bool wide = false);

}  // namespace xsagpt
