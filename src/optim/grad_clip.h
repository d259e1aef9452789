// Global-norm gradient clipping without a host synchronisation: the norm stays a
// device tensor and the scale factor is applied with foreach kernels, so the GPU
// never waits for the CPU. The norm is read only when a log line needs it.
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// Returns the global L2 norm of the gradients before clipping (a 0-dim float32
// tensor on the gradients' device). max_norm <= 0 only measures.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm);

}  // namespace xsagpt
