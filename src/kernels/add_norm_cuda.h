// CUDA kernels of kernels/add_norm.h: one warp per row, float32 arithmetic.
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// x: (N, d) float32 contiguous; branch: (N, d) contiguous in h's dtype, or
// undefined; weight (d) float32, bias (d) float32 or undefined. Writes x_out =
// x + branch (float32; not written without a branch), h = (x_out - mean) * rstd *
// weight + bias in h's dtype (float32, bf16 or half), and mean, rstd (N) float32.
void add_norm_forward_cuda(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& weight,
                           const torch::Tensor& bias, double eps, torch::Tensor& x_out, torch::Tensor& h,
                           torch::Tensor& mean, torch::Tensor& rstd);

// dh: (N, d) contiguous in h's dtype; dx_out: (N, d) float32 contiguous or
// undefined; x_out, mean, rstd, weight as in forward. Writes dx (N, d) float32
// (the gradient of x and, with a branch, of x_out's other input), dbranch in its
// dtype when defined, dweight (d) and, when defined, dbias (d), float32.
void add_norm_backward_cuda(const torch::Tensor& dh, const torch::Tensor& dx_out, const torch::Tensor& x_out,
                            const torch::Tensor& mean, const torch::Tensor& rstd, const torch::Tensor& weight,
                            torch::Tensor& dx, torch::Tensor& dbranch, torch::Tensor& dweight, torch::Tensor& dbias);

}  // namespace xsagpt
