// CUDA kernel of kernels/lm_head_loss.h: the cross-entropy of a block of logit
// rows and, in the same pass, the logits' gradient written over them.
#pragma once

#include <ATen/core/Tensor.h>

namespace xsagpt {

// logits: (n, V) contiguous, float32, bf16 or half; targets: (n) int64 in [0, V),
// -1 for ignored rows (others are the caller's to reject; they read nothing); inv_count: 0-dim float32, 1 / (number of
// non-ignored targets in the whole batch). Writes losses (n) float32: logsumexp(row) - row[target], 0 for ignored rows.
// With write_grad, each row is replaced by the gradient of sum(losses) * inv_count: (softmax(row) - onehot(target)) *
// inv_count, zeros for ignored rows.
void cross_entropy_rows_cuda(at::Tensor& logits, const at::Tensor& targets, const at::Tensor& inv_count,
                             at::Tensor& losses, bool write_grad);

}  // namespace xsagpt
