// CUDA kernels of kernels/fp8_linear.h's quantizer: q = fp8(clamp(x * scale, -top,
// top)), reading the scale from device memory (no host sync). ATen's unfused form
// reads and writes a float32 copy of x three times over, more traffic than the FP8
// GEMM that follows saves; these read x once and write a byte per element per copy.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// x: contiguous float32, bf16 or half; scale: one float32 element on x's device;
// q: contiguous, x's size, Float8_e4m3fn or Float8_e5m2; top: that format's
// largest value. The conversion rounds to nearest as ATen's does (c10's).
void fp8_scale_cast_cuda(const at::Tensor& x, const at::Tensor& scale, double top, at::Tensor& q);

// The same cast of a 2-D x (rows, cols), writing q (rows, cols) and its transpose
// qt (cols, rows), both contiguous and of one FP8 dtype. cuBLASLt's FP8 GEMM takes
// only operands whose reduction dimension is contiguous, so every FP8 tensor the
// layer multiplies is needed in both layouts (its weight gradient reduces over the
// rows); the transpose goes through shared memory in the same pass, read and
// written coalesced, instead of a strided copy of q afterwards.
void fp8_scale_cast_transpose_cuda(const at::Tensor& x, const at::Tensor& scale, double top, at::Tensor& q,
                                   at::Tensor& qt);

}  // namespace xsagpt
