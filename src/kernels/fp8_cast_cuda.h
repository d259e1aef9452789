// CUDA kernels of kernels/fp8_linear.h's quantizer: q = fp8(clamp(x * scale, -top,
// top)) with scale = top / max(amax, 1e-12), reading amax from device memory and
// writing the inverse scale there (no host sync). ATen's unfused form reads and
// writes a float32 copy of x three times over, more traffic than the FP8 GEMM that
// follows saves, and makes the scale in four one-element kernels (fill, clamp,
// divide, reciprocal) per tensor; these read x once, write a byte per element per
// copy, and compute the scale in each thread from the one amax.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// The floor on amax that keeps an all-zero tensor's scale finite.
constexpr float kFp8AmaxFloor = 1e-12f;

// x: contiguous float32, bf16 or half; amax: one float32 element on x's device, the
// largest |x| (from a reduction, or from the kernel that made x); q: contiguous,
// x's size, Float8_e4m3fn or Float8_e5m2; top: that format's largest value; inv:
// one float32 element on x's device, written with 1 / scale. The scale is the
// float32 quotient top / max(amax, 1e-12), the conversion rounds to nearest as
// ATen's does (c10's): the ATen twin in fp8_linear.cpp computes the same.
void fp8_scale_cast_cuda(const at::Tensor& x, const at::Tensor& amax, double top, at::Tensor& q, at::Tensor& inv);

// The same cast of a 2-D x (rows, cols), writing q (rows, cols) and its transpose
// qt (cols, rows), both contiguous and of one FP8 dtype. cuBLASLt's FP8 GEMM takes
// only operands whose reduction dimension is contiguous, so every FP8 tensor the
// layer multiplies is needed in both layouts (its weight gradient reduces over the
// rows); the transpose goes through shared memory in the same pass, read and
// written coalesced, instead of a strided copy of q afterwards.
void fp8_scale_cast_transpose_cuda(const at::Tensor& x, const at::Tensor& amax, double top, at::Tensor& q,
                                   at::Tensor& qt, at::Tensor& inv);

}  // namespace xsagpt
