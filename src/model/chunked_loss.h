// Cross-entropy of the LM head without materialising the logits of the whole
// micro-batch. For 16 x 2048 tokens and a 50K vocabulary the float32 logits, their
// softmax and its gradient are 3 x 6.6 GB; computed `chunk` rows at a time (and
// recomputed in backward) only one chunk's logits exist at once. The result is
// the mean over targets != -1, as F::cross_entropy(..., ignore_index=-1).
#pragma once

#include <torch/torch.h>

namespace xsagpt {

// hidden: (N, d); weight: (V, d); targets: int64 (N). Under autocast the matmuls
// run in the autocast dtype and the softmax in float32.
torch::Tensor chunked_cross_entropy(const torch::Tensor& hidden, const torch::Tensor& weight,
                                    const torch::Tensor& targets, int64_t chunk);

// Each row's loss as chunked_cross_entropy computes it, 0 for a target of -1, (N);
// without a gradient. Their sum over the count of targets != -1 is its value.
torch::Tensor chunked_token_losses(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t chunk);

}  // namespace xsagpt
