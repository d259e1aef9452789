// The exact GELU, h = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2, for an MLP whose
// products around it are FP8: the one that reads h (the down projection) needs
// max |h| for its scale, the one that made x (the up projection) the amax of x's
// gradient. The GELU's own passes over h and over that gradient are the cheapest
// places to take them: otherwise each quantizer reads a (tokens x 4 d_model) tensor,
// the largest of the step, once more. Each amax taken is handed over for its tensor
// (kernels/amax_handoff.h).
//
// One CUDA kernel each way (kernels/gelu_amax_cuda.h), in ATen's float32 formulas
// for GELU and its derivative; the ATen twin, on a CPU and for dtypes the kernels do
// not take, is at::gelu, at::gelu_backward and a max.
#pragma once

#include "kernels/amax_handoff.h"

#include <torch/torch.h>

namespace xsagpt {

// gelu(x) in x's dtype, with its gradient; `amax.output` takes max |h| of h as
// stored, `amax.input_grad` max |dx| of x's gradient as stored.
torch::Tensor exact_gelu(const torch::Tensor& x, Fp8Amax amax);

}  // namespace xsagpt
