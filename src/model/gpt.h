// The GPT of the paper: nanoGPT with RoPE instead of learned positions and a
// LayerNorm right after the token embedding.
//
//   x = ln_e(wte(idx))
//   for each block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
//   logits = lm_head(ln_f(x))          (lm_head tied to wte by default)
//
// Attention sinks (model.n_sink > 0, StreamingLLM's learnable sink): learned
// vectors transformer.sink (n_sink, d_model) placed in front of every sequence as
// if they were its first tokens: x = ln_e([sink; wte(idx)]). They take RoPE
// positions 0..n_sink-1 and the tokens n_sink.. (RoPE only sees distances, so
// token-token attention is as without sinks; each token sees the sinks at its own
// distance, exactly as a sink token trained at the start of every sequence). All
// positions attend to them; they yield no logits and so no loss.
//
// Parameter names follow nanoGPT (transformer.h.0.attn.c_attn.weight, ...), so a
// checkpoint's state dict reads naturally from Python.
#pragma once

#include "config/model_config.h"
#include "model/attention.h"
#include "model/layers.h"

#include <torch/torch.h>

namespace xsagpt {

struct BlockImpl : torch::nn::Module {
  BlockImpl(const ModelConfig& cfg, int64_t layer);
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                        KVCache::Layer* cache = nullptr, int64_t past = 0);
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  bool recompute_mlp = false;  // activation checkpointing of the MLP half (see memory options below)
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(const ModelConfig& cfg);
  torch::nn::Embedding wte{nullptr};
  torch::Tensor sink;       // (n_sink, d_model); only with model.n_sink > 0
  LayerNorm ln_e{nullptr};  // the paper's post-embedding norm
  torch::nn::Dropout drop{nullptr};
  torch::nn::ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Transformer);

// Holds the output projection; when tied, `weight` is the embedding tensor itself.
struct LMHeadImpl : torch::nn::Module {
  explicit LMHeadImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::nn::functional::linear(x, weight); }
  torch::Tensor weight;
};
TORCH_MODULE(LMHead);

struct GPTOutput {
  torch::Tensor logits;  // (B, T, vocab); undefined when the loss was computed in chunks
  torch::Tensor loss;    // mean cross-entropy over targets != -1; undefined without targets
};

struct GPTImpl : torch::nn::Module {
  explicit GPTImpl(ModelConfig cfg);

  // idx: int64 (B, T) with T <= block_size; targets: int64 (B, T) or undefined.
  // With a cache (generation, no targets), idx continues the cached positions;
  // sinks enter with the first call.
  GPTOutput forward(const torch::Tensor& idx, const torch::Tensor& targets = {}, KVCache* cache = nullptr);

  // The residual stream entering block 0: ln_e([sink; wte(idx)]), (B, S+T, d_model)
  // with S = n_sink if with_sinks else 0.
  torch::Tensor embed(const torch::Tensor& idx, bool with_sinks);

  // Parameters without the tied duplicate, in registration order.
  std::vector<std::pair<std::string, torch::Tensor>> unique_named_parameters() const;

  // Memory options, trading compute for activation memory (train.* keys, not part
  // of the model): "none" | "mlp" | "block" activation checkpointing, and the
  // LM-head loss in chunks of this many tokens (0: full logits).
  void set_memory_options(const std::string& recompute, int64_t loss_chunk);

  // train.xsa_kernel: "ops" (exclude_self_value) or "fused" (exclude_self_value_fused,
  // the CUDA kernels); see model/xsa.h.
  void set_xsa_kernel(const std::string& kernel);

  ModelConfig cfg;
  Transformer transformer{nullptr};
  LMHead lm_head{nullptr};
  torch::Tensor rope_cos, rope_sin;  // buffers, (n_sink + block_size, head_dim/2)

 private:
  void init_weights();
  bool recompute_blocks_ = false;
  int64_t loss_chunk_ = 0;
};
TORCH_MODULE(GPT);

}  // namespace xsagpt
