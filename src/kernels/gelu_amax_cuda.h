// CUDA kernel of kernels/gelu_amax.h: the exact GELU of x into h, and max |h| into
// amax, in one pass.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// x, h: contiguous, one size, float32, bf16 or half (h in x's dtype); amax: one
// float32 on x's device holding 0 (or a lower bound), raised to max |h| as stored.
// The arithmetic is ATen's exact GELU in float32: x * 0.5 * (1 + erf(x / sqrt 2)).
void gelu_amax_cuda(const at::Tensor& x, at::Tensor& h, at::Tensor& amax);

}  // namespace xsagpt
