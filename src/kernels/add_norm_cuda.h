// CUDA kernels of kernels/add_norm.h, float32 arithmetic: forward a warp per row,
// backward a block per row (add_norm_cuda.cu says why).
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// x: (N, d) float32 contiguous; branch: (N, d) contiguous, float32 or h's dtype
// (added in float32 either way), or undefined; weight (d) float32, bias (d) float32 or undefined. Writes x_out =
// x + branch (float32; not written without a branch), h = (x_out - mean) * rstd *
// weight + bias in h's dtype (float32, bf16 or half), and mean, rstd (N) float32.
// amax: undefined, or one float32 holding 0 (or a lower bound), raised to the
// largest |h| as stored. rows_in_registers: rows of up to 2560 columns (multiples of
// 4) are read once into registers instead of three times (the same arithmetic in the
// same order, so the same results).
void add_norm_forward_cuda(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight,
                           const at::Tensor& bias, double eps, at::Tensor& x_out, at::Tensor& h, at::Tensor& mean,
                           at::Tensor& rstd, at::Tensor& amax, bool rows_in_registers);

// Whether the backward kernel takes rows of width d: it keeps each thread's
// columns of a row in registers, 4096 columns at most (every paper size is at
// most 2560). Wider rows take the ATen twin.
constexpr int64_t kAddNormBackwardMaxWidth = 4096;
bool add_norm_backward_cuda_fits(int64_t d);

// dh: (N, d) contiguous in h's dtype; dx_out: (N, d) float32 contiguous or
// undefined; x_out, mean, rstd, weight as in forward. Writes dx (N, d) float32
// (the gradient of x and, with a branch, of x_out's other input), dbranch in its
// dtype when defined, dweight (d) and, when defined, dbias (d), float32.
// dbranch_amax: undefined, or (with dbranch) one float32 holding 0, raised to
// max |dbranch| as stored.
void add_norm_backward_cuda(const at::Tensor& dh, const at::Tensor& dx_out, const at::Tensor& x_out,
                            const at::Tensor& mean, const at::Tensor& rstd, const at::Tensor& weight, at::Tensor& dx,
                            at::Tensor& dbranch, at::Tensor& dweight, at::Tensor& dbias, at::Tensor& dbranch_amax);

}  // namespace xsagpt
