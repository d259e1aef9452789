// The two cuBLASLt GEMMs of kernels/gelu_mlp.h, on the current stream with ATen's
// cuBLASLt handle and workspace. Row-major tensors are handed to the column-major
// library as their transposes (a row-major (N, H) matrix is a column-major (H, N)
// one with leading dimension H), so each GEMM is computed as D^T = op(A)^T B^T:
// the output's rows are the hidden units, which is what the epilogue's bias and
// bias gradient run along.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// pre = x2 w1c^T + b1c and h = gelu_tanh(pre), (N, H) each, written into the
// given contiguous tensors; x2 (N, d), w1c (H, d), b1c (H) or undefined, all of
// one dtype (bf16 or half); float32 accumulation. Epilogue GELU_AUX(_BIAS).
void gelu_up_cuda(const at::Tensor& x2, const at::Tensor& w1c, const at::Tensor& b1c, at::Tensor& pre, at::Tensor& h);

// dpre = (g2 w2c) * gelu_tanh'(pre), (N, H), and with db1 defined (H, the dtype
// of g2) its sum over the N rows. g2 (N, d), w2c (d, H), pre (N, H).
// Epilogue DGELU, or DGELU_BGRAD with db1.
void dgelu_down_cuda(const at::Tensor& g2, const at::Tensor& w2c, const at::Tensor& pre, at::Tensor& dpre,
                     at::Tensor& db1);

}  // namespace xsagpt
