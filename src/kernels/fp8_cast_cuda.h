// CUDA kernel of kernels/fp8_linear.h's quantizer: q = fp8(clamp(x * scale, -top,
// top)) in one pass, reading the scale from device memory (no host sync). ATen's
// unfused form reads and writes a float32 copy of x three times over, more traffic
// than the FP8 GEMM that follows saves; this reads x once and writes a byte per element.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// x: contiguous float32, bf16 or half; scale: one float32 element on x's device;
// q: contiguous, x's size, Float8_e4m3fn or Float8_e5m2; top: that format's
// largest value. The conversion rounds to nearest as ATen's does (c10's).
void fp8_scale_cast_cuda(const at::Tensor& x, const at::Tensor& scale, double top, at::Tensor& q);

}  // namespace xsagpt
