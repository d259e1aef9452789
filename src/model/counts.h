// Size, compute and memory arithmetic for a model config, without building the
// model (the 2.7B model would need 11 GB just to be constructed in float32).
//  - parameters: exact, checked against the built model in the tests;
//  - FLOPs per token: 6*N_matmul for forward+backward plus the attention term
//    12 * n_layer * inner_dim * T (PaLM appendix B; the convention MFU uses), plus
//    the products of the attention kind's step in the layers that take it (its
//    row's work, model/attention_kinds.h: a gate's matrix);
//  - training memory: weights, grads and optimizer state (AdamW's two moments, or
//    Muon's one momentum for the block matrices) in float32 plus an estimate
//    of the activations autograd keeps for one micro-batch (the kind's step's
//    own from its row), with the memory
//    options (activation checkpointing, chunked loss) the trainer can run with,
//    or, when larger, Muon's Newton-Schulz work in the optimizer step, plus the
//    RoPE tables, which grow with model.block_size rather than with the batch.
//    Checked against measured peaks on the CPU in tests/cpp/model/test_memory_estimate.cpp.
#pragma once

#include "config/model_config.h"
#include "config/runtime.h"

#include <algorithm>
#include <array>
#include <string>

namespace xsagpt {

struct ParamCounts {
  int64_t total = 0;           // unique parameters (a tied head counted once)
  int64_t embedding = 0;       // token embedding (+ untied head)
  int64_t non_embedding = 0;   // total - embedding
  int64_t matmul = 0;          // parameters used in a matmul per token (incl. the LM head)
  int64_t block_matrices = 0;  // weights of the blocks' q/k/v, output and MLP matrices (what Muon updates)
};
ParamCounts count_params(const ModelConfig& c);

double flops_per_token(const ModelConfig& c, int64_t seq_len);

// The four products of every block (qkv, attention output, MLP up, MLP down) with
// their widths, and whether the fp8 kernels run each as FP8 GEMMs: fp8_all all of
// them, fp8 those large enough to pay (kernels/fp8_linear.h's fp8_pays), neither none.
struct BlockProduct {
  const char* name;
  int64_t in, out;
  bool fp8;
};
std::array<BlockProduct, 4> block_products(const ModelConfig& c, const Kernels& k);

struct MemoryEstimate {
  double params_bytes = 0, grads_bytes = 0, optimizer_bytes = 0;
  double activations_bytes = 0;     // kept by autograd from the end of forward into backward
  double logits_bytes = 0;          // the LM head's logits, probabilities and gradients at once
  double weight_copies_bytes = 0;   // bf16 copies of the weights (weights kernel); e4m3 copies + scales (fp8)
  double recompute_bytes = 0;       // one layer's activations re-made in backward (checkpointing)
  double optimizer_step_bytes = 0;  // Muon's Newton-Schulz work on its largest group of same-shape matrices
  double rope_tables_bytes = 0;     // RoPE's cos and sin, float32, for n_sink + block_size positions (model/rope.h)
  // What exists before the first step, exactly: weights, gradients, optimizer
  // state, weight copies and the RoPE tables.
  double state() const {
    return params_bytes + grads_bytes + optimizer_bytes + weight_copies_bytes + rope_tables_bytes;
  }
  // The logits are gone before any layer is recomputed, so only the larger
  // counts. Adding all the gradients makes this an upper bound: they fill up as
  // backward frees activations. The optimizer steps after backward, with the
  // gradients but without the activations.
  double total() const {
    return state() + std::max(activations_bytes + std::max(logits_bytes, recompute_bytes), optimizer_step_bytes);
  }
};

// What changes memory: the runtime the model trains in (config/runtime.h: bf16
// activations or float32, checkpointing, loss chunk, kernels: weights adds bf16
// weight copies, fp8 e4m3 ones of the blocks' matrices it takes, loss changes the LM
// head's buffers) and the ranks sharing the
// AdamW state (train.shard_optimizer: the world size; optim/zero.h), and whether
// Muon takes the block matrices (optim/run_optimizer.h).
struct MemoryOptions {
  Runtime rt;
  int64_t optimizer_shards = 1;
  bool muon = false;  // train.optimizer=muon: one momentum buffer (4 bytes) per block matrix weight, not two moments
  bool cuda = false;  // Muon's Newton-Schulz runs in bf16 on CUDA, in float32 elsewhere (optim/muon.h)
};
MemoryEstimate estimate_training_memory(const ModelConfig& c, int64_t micro_batch, int64_t seq_len,
                                        const MemoryOptions& o);

}  // namespace xsagpt
