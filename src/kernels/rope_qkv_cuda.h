// CUDA kernels of kernels/rope_qkv.h: one thread moves VEC pairs (i, i + D/2) of
// one (position, head) for q, k and v, rotating q and k.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// qkv: (B, T, 3*H*D), last dim contiguous; cos, sin: (T, D/2) float32 contiguous on
// qkv's device. Writes q, k (rotated) and v: (B, T, H, D) contiguous, qkv's dtype.
void rope_qkv_forward_cuda(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& q,
                           at::Tensor& k, at::Tensor& v);

// dq, dk, dv: (B, T, H, D), last dim contiguous, other strides free. Writes dqkv
// (B, T, 3*H*D) contiguous: q and k rotated back (by -angle), v copied. amax:
// undefined, or one float32 holding 0, raised to max |dqkv| as stored.
void rope_qkv_backward_cuda(const at::Tensor& dq, const at::Tensor& dk, const at::Tensor& dv, const at::Tensor& cos,
                            const at::Tensor& sin, at::Tensor& dqkv, at::Tensor& amax);

}  // namespace xsagpt
