// Exclusive Self Attention (arXiv 2603.09078). Standard attention returns
// y_i = sum_j a_ij v_j, which tends to point along the token's own value v_i.
// XSA removes that component, per head, before the output projection:
//
//     z_i = y_i - (y_i . v^_i) v^_i,      v^_i = v_i / max(||v_i||, eps)
//
// so z_i is orthogonal to v_i and attention carries only information from
// other tokens. No parameters. Under bf16 autocast the projection is computed
// in float32: the subtraction cancels most of y_i and bf16 would lose it.
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// y, v: (..., head_dim), same shape. Returns z in y's dtype.
torch::Tensor exclude_self_value(const torch::Tensor& y, const torch::Tensor& v, double eps);

}  // namespace xsagpt
