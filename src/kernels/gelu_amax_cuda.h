// CUDA kernels of kernels/gelu_amax.h: the exact GELU of x into h, or its gradient
// into dx, with max |written value| raised into an amax, in one pass each.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// x, h: contiguous, one size, float32, bf16 or half (h in x's dtype); amax:
// undefined, or one float32 on x's device holding 0 (or a lower bound), raised to
// max |h| as stored. ATen's float32 arithmetic: x * 0.5 * (1 + erf(x / sqrt 2)).
void gelu_amax_cuda(const at::Tensor& x, at::Tensor& h, at::Tensor& amax);

// dy, x, dx: contiguous, one size and dtype; dx = dy * gelu'(x) in ATen's float32
// arithmetic (cdf + x * pdf); amax as above, for dx.
void gelu_backward_amax_cuda(const at::Tensor& dy, const at::Tensor& x, at::Tensor& dx, at::Tensor& amax);

}  // namespace xsagpt
