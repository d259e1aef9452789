// The LM head and its cross-entropy as one op, with the gradient made in the
// forward pass (as llm.c's fused classifier does). The loss is the last thing a
// training step computes, so its gradient with respect to the logits is known the
// moment the logits are: for each chunk of rows, one GEMM makes the chunk's logits
// in the compute dtype, one kernel turns every row into its loss and overwrites it
// with (softmax - onehot) / count, and two more GEMMs take that straight to the
// hidden states' gradient and into the head weight's float32 gradient. Nothing of
// the logits outlives its chunk, nothing is recomputed in backward (which only
// scales what forward made), and no float32 copy of the logits ever exists: over
// a 50K vocabulary those copies and their softmax are most of an eager step's
// non-matmul time. Chunking therefore costs nothing; the chunk bounds memory.
// Without grad (evaluation, or grad mode off) only the losses are computed: one GEMM
// per chunk and no gradient buffers.
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// hidden: (N, d); weight: (V, d), the parameter (its gradient comes in its dtype);
// weight_c: the same matrix in the compute dtype (weight itself, or a cached copy,
// kernels/linear.h); hidden is cast to it. targets: int64 (N) in [0, V), -1 =
// ignored; any other value is an error, as in ATen's cross_entropy (thrown on the
// CPU, a device-side assert on CUDA, so no step waits for the check).
// Returns the mean over non-ignored targets of -log softmax(hidden @ weight^T)[target]
// (float32, or float64 for float64 inputs). chunk: rows at a time (0: all on a GPU,
// 128 on a CPU, where a chunk's logits then stay in cache).
torch::Tensor lm_head_loss(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& weight_c,
                           const torch::Tensor& targets, int64_t chunk);

// The same computation without a gradient, stopping short of the mean: each row's
// -log softmax(hidden @ weight_c^T)[target], 0 for a target of -1; (N) float32 (float64
// for float64). lm_head_loss without grad is these rows summed over the count.
torch::Tensor lm_head_token_losses(const torch::Tensor& hidden, const torch::Tensor& weight_c,
                                   const torch::Tensor& targets, int64_t chunk);

// The ATen twin of the kernel (lm_head_loss_cuda.h), any float dtype; losses in
// float32 or float64.
void cross_entropy_rows_aten(torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& inv_count,
                             torch::Tensor& losses, bool write_grad);

}  // namespace xsagpt
