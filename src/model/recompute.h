// Activation checkpointing: run a piece of the network without keeping its
// intermediate activations, and run it again during backward to get them back.
// LibTorch has no torch.utils.checkpoint, so this is a custom autograd function:
// forward keeps only the input; backward recomputes fn(input) with grad enabled
// and backpropagates through it. The recomputation sees the same autocast state
// and the same random numbers (dropout) as the original forward.
#pragma once

#include <torch/torch.h>

#include <functional>

namespace xsagpt {

using TensorFn = std::function<torch::Tensor(const torch::Tensor&)>;

// fn(x) whose activations are recomputed in backward. Parameters fn uses get
// their gradients as usual. Without grad mode, or when x needs no grad, it is
// simply fn(x).
torch::Tensor recompute_in_backward(const TensorFn& fn, const torch::Tensor& x);

}  // namespace xsagpt
