// The exact GELU, h = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, returning with h the
// largest |h|: the activation an FP8 product reads (the MLP's down projection,
// kernels/fp8_linear.h) needs that amax for its scale, and the GELU's own pass over
// its output is the cheapest place to take it. Otherwise the quantizer reads the
// (tokens x 4 d_model) activation, the largest of the step, once more for it.
//
// One CUDA kernel (kernels/gelu_amax_cuda.h) writes h and raises the amax; its ATen
// twin, on a CPU and for dtypes the kernel does not take, is at::gelu and a max.
// The gradient is at::gelu_backward's, the one torch::gelu's autograd computes,
// from the saved input: nothing about the backward changes.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace xsagpt {

// (gelu(x), max |gelu(x)|): h in x's dtype, the amax a float32 scalar on x's device
// taken of h as stored (after its rounding to x's dtype), outside the graph.
std::pair<torch::Tensor, torch::Tensor> gelu_with_amax(const torch::Tensor& x);

}  // namespace xsagpt
