// Size, compute and memory arithmetic for a model config, without building the
// model (the 2.7B model would need 11 GB just to be constructed in float32).
//  - parameters: exact, checked against the built model in the tests;
//  - FLOPs per token: 6*N_matmul for forward+backward plus the attention term
//    12 * n_layer * inner_dim * T (PaLM appendix B; the convention MFU uses);
//  - training memory: weights, grads and AdamW state in float32 plus an estimate
//    of the activations autograd keeps for one micro-batch.
#pragma once

#include "config/model_config.h"

namespace xsagpt {

struct ParamCounts {
  int64_t total = 0;          // unique parameters (a tied head counted once)
  int64_t embedding = 0;      // token embedding (+ untied head)
  int64_t non_embedding = 0;  // total - embedding
  int64_t matmul = 0;         // parameters used in a matmul per token (incl. the LM head)
};
ParamCounts count_params(const ModelConfig& c);

double flops_per_token(const ModelConfig& c, int64_t seq_len);

struct MemoryEstimate {
  double params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0, activations_bytes = 0, logits_bytes = 0;
  double total() const { return params_bytes + grads_bytes + optimizer_bytes + activations_bytes + logits_bytes; }
};
// bf16: autocast activations (2 bytes); otherwise float32.
MemoryEstimate estimate_training_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq_len, bool bf16);

}  // namespace xsagpt
