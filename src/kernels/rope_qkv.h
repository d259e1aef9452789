// The attention's input side in one pass: the fused qkv projection split into
// heads, q and k rotated by RoPE (model/rope.h), each of q, k, v written as one
// (B, T, H, D) buffer, the layout flash attention reads through (B, H, T, D) views.
// In ATen this is a view and a transpose, then per rotated tensor about six
// elementwise kernels and a cat, forward and again backward, and a cat of the
// three gradients at the end; here it is one kernel each way, backward writes the
// qkv gradient in place, and nothing is saved (rotating back is rotating by -angle).
// Arithmetic in float32 (ATen's path rounds cos and sin to bf16 first).
#pragma once

#include <torch/torch.h>

#include <tuple>

namespace xsagpt {

// qkv: (B, T, 3*n_head*head_dim) as the c_attn projection returns it; cos, sin:
// (T, head_dim/2) float32 rows for its positions. Returns q, k, v as (B, H, T, D).
// With `qkv_grad_amax` (an FP8 qkv product) the backward takes the amax of the qkv
// gradient it writes and hands it over (kernels/amax_handoff.h).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> rope_qkv(const torch::Tensor& qkv, int64_t n_head,
                                                                 int64_t head_dim, const torch::Tensor& cos,
                                                                 const torch::Tensor& sin, bool qkv_grad_amax = false);

// The ATen twin of the kernels (used off CUDA, and as the tests' reference):
// forward with inverse = false, backward with inverse = true; arguments as in
// rope_qkv_cuda.h.
void rope_qkv_aten(const torch::Tensor& q_in, const torch::Tensor& k_in, const torch::Tensor& v_in,
                   const torch::Tensor& cos, const torch::Tensor& sin, bool inverse, torch::Tensor& q_out,
                   torch::Tensor& k_out, torch::Tensor& v_out);

}  // namespace xsagpt
