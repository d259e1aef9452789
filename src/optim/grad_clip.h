// Global-norm gradient clipping without a host synchronisation: the norm stays a
// device tensor and the scale factor is applied with foreach kernels, so the GPU
// never waits for the CPU. The norm is read only when a log line needs it.
//
// The factor can also be handed to the optimizer instead of applied here (the
// "clip" kernel row): AdamW's fused kernel then scales each gradient as it reads
// it, which saves a pass over every gradient (optim/optimizer.h).
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// The global L2 norm of the parameters' gradients (a 0-dim float32 tensor on the
// gradients' device).
torch::Tensor grad_norm(const std::vector<torch::Tensor>& params);

// What clipping to max_norm multiplies every gradient by: min(1, max_norm / (norm + 1e-6)),
// a 0-dim float32 tensor beside `norm`. max_norm must be > 0.
torch::Tensor clip_factor(const torch::Tensor& norm, double max_norm);

// Every parameter's gradient (those that have one) multiplied by `factor` in place:
// the clip, wherever it is applied (below, or by an optimizer that cannot fold it).
void scale_grads(const std::vector<torch::Tensor>& params, const torch::Tensor& factor);

// Returns the global L2 norm of the gradients before clipping, and clips them in
// place. max_norm <= 0 only measures.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace xsagpt
