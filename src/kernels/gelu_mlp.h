// The MLP  y = gelu_tanh(x W1^T + b1) W2^T + b2  as one autograd function whose
// first GEMM carries the GELU in its epilogue, and whose backward's first GEMM
// carries GELU's derivative (cuBLASLt, kernels/gelu_mlp_cuda.h):
//
//   forward   pre = x W1^T + b1,  h = gelu(pre)    one GEMM, epilogue GELU_AUX(_BIAS):
//                                                  writes h and, as its auxiliary output, pre
//             y   = h W2^T + b2                    a plain GEMM
//   backward  dpre = (dy W2) * gelu'(pre)          one GEMM, epilogue DGELU(_BGRAD): reads pre,
//                                                  writes dpre (and db1 = sum of dpre over tokens)
//             dW2 = dy^T h,  db2 = sum dy,  dW1 = dpre^T x,  dx = dpre W1   plain
//
// Unfused, ATen runs the same GEMMs plus a GELU kernel each way, which reads and
// writes the (tokens x 4 d_model) activation once more in forward and twice more in
// backward: the largest tensors of the step. cuBLASLt's GELU is the tanh
// approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), so this runs only
// models with model.gelu "tanh" (config/kernel_fit.h refuses the others).
//
// The ATen twin computes the same with at::linear, at::gelu(.., "tanh") and
// at::gelu_backward: on a CPU, in float32/float64 anywhere, and on CUDA where the
// cuBLASLt path cannot take the operands (not bf16 or half, widths that are not
// multiples of 8, misaligned data). Weight gradients come out of their GEMMs in
// the weights' dtype (float32 from bf16 operands, as kernels/linear.h does), bias
// gradients are summed in the biases' dtype; on CUDA db1 is the epilogue's sum,
// rounded once to the compute dtype.
#pragma once

#include <torch/torch.h>

#include <utility>

namespace xsagpt {

// x (..., d) in the compute dtype; w1 (H, d), w2 (d, H) the master weights (their
// gradients arrive in their dtype) and w1c, w2c their copies in x's dtype (the
// same tensors when the dtypes agree); b1 (H), b2 (d) the master biases or
// undefined. Returns y (..., d) in x's dtype.
torch::Tensor gelu_mlp(const torch::Tensor& x, const torch::Tensor& w1, const torch::Tensor& w1c,
                       const torch::Tensor& b1, const torch::Tensor& w2, const torch::Tensor& w2c,
                       const torch::Tensor& b2);

// The two fused GEMMs' ATen twins on 2-D operands (the CUDA tests compare the
// cuBLASLt calls with these): {pre, gelu_tanh(pre)} with pre = x2 w1c^T + b1c, and
// dpre = (g2 w2c) * gelu_tanh'(pre). b1c may be undefined.
std::pair<torch::Tensor, torch::Tensor> gelu_up_aten(const torch::Tensor& x2, const torch::Tensor& w1c,
                                                     const torch::Tensor& b1c);
torch::Tensor dgelu_down_aten(const torch::Tensor& g2, const torch::Tensor& w2c, const torch::Tensor& pre);

// Whether the cuBLASLt path takes these operands: CUDA, a build with the kernels,
// bf16 or half, contiguous, both widths multiples of 8 (the epilogue's auxiliary
// matrix needs a leading dimension divisible by 8) and 16-byte aligned data.
bool gelu_mlp_cuda_fits(const torch::Tensor& x2, const torch::Tensor& w1c, const torch::Tensor& w2c);

}  // namespace xsagpt
