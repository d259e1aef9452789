// A residual add and the LayerNorm that follows it, as one op:
//     x_out = x + branch;   h = (x_out - mean) / sqrt(var + eps) * weight + bias
// The transformer's residual stream (float32) meets a LayerNorm after every
// branch, and eagerly that is an add, a float32 LayerNorm, a cast of h to bf16
// for the next matmul, and in backward the LayerNorm's gradient in float32, an add
// of it to the stream's gradient and a cast of the branch's gradient to bf16. Here
// one kernel each way does all of it: forward reads x and the branch once and
// writes x_out, h (in the compute dtype) and the row statistics; backward reads
// the two incoming gradients and writes the stream's gradient, the branch's (its
// own dtype) and per-block partial sums for weight and bias.
// Without a branch it is a LayerNorm whose output comes in the compute dtype.
#pragma once

#include "kernels/amax_handoff.h"

#include <torch/torch.h>

#include <utility>

namespace xsagpt {

// x: (..., d) float32 (or float64); branch: same shape, any float dtype, or
// undefined; weight, bias: (d) in x's dtype (bias may be undefined). Returns
// (x_out, h) with h in `out_dtype`; x_out is x itself when there is no branch.
// `amax` names what FP8 products read (kernels/amax_handoff.h): with `output`, the
// forward takes max |h| of h as returned (after its rounding to out_dtype) and hands
// it over for h; with `input_grad`, the backward does the same for the branch's
// gradient (in h's dtype; the product that made the branch quantizes it).
// rows_in_registers: the CUDA forward's choice (add_norm_cuda.h; the norm_regs kernel).
std::pair<torch::Tensor, torch::Tensor> add_layer_norm(const torch::Tensor& x, const torch::Tensor& branch,
                                                       const torch::Tensor& weight, const torch::Tensor& bias,
                                                       double eps, c10::ScalarType out_dtype, Fp8Amax amax = {},
                                                       bool rows_in_registers = false);

// The ATen twins of the kernels, on (N, d) tensors, arguments as in
// add_norm_cuda.h (any float dtypes; statistics in x's dtype).
void add_norm_forward_aten(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& weight,
                           const torch::Tensor& bias, double eps, torch::Tensor& x_out, torch::Tensor& h,
                           torch::Tensor& mean, torch::Tensor& rstd, torch::Tensor& amax);
void add_norm_backward_aten(const torch::Tensor& dh, const torch::Tensor& dx_out, const torch::Tensor& x_out,
                            const torch::Tensor& mean, const torch::Tensor& rstd, const torch::Tensor& weight,
                            torch::Tensor& dx, torch::Tensor& dbranch, torch::Tensor& dweight, torch::Tensor& dbias,
                            torch::Tensor& dbranch_amax);

}  // namespace xsagpt
