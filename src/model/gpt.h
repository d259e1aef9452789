// The GPT of the paper: nanoGPT with RoPE instead of learned positions and a
// LayerNorm right after the token embedding.
//
//   x = ln_e(wte(idx))
//   for each block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
//   logits = lm_head(ln_f(x))
//
// The LM head is its own matrix by default, started small; config/model_config.h
// (tie_embeddings, head_init) says why, and what a head tied as nanoGPT ties it does.
// Under μP (model.parametrization "mup") the hidden matrices start smaller, the head
// reads ln_f's output over the width multiplier m and attention scores scale as
// 1/head_dim (config/model_config.h; model/mup.h holds the rules per parameter).
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
#include "config/runtime.h"
#include "model/attention.h"
#include "model/exec.h"
#include "model/layers.h"
#include "model/residual.h"

#include <torch/torch.h>

#include <map>
#include <string>

namespace xsagpt {

struct BlockImpl : torch::nn::Module {
  BlockImpl(const ModelConfig& cfg, int64_t layer, ExecPtr exec);
  // x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))  on the residual stream x.
  void forward(Residual& x, const torch::Tensor& cos, const torch::Tensor& sin, KVCache::Layer* cache = nullptr,
               int64_t past = 0);
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};
  ExecPtr exec;
};
TORCH_MODULE(Block);

struct TransformerImpl : torch::nn::Module {
  TransformerImpl(const ModelConfig& cfg, const ExecPtr& exec);
  torch::nn::Embedding wte{nullptr};
  torch::Tensor sink;       // (n_sink, d_model); only with model.n_sink > 0
  LayerNorm ln_e{nullptr};  // the paper's post-embedding norm
  torch::nn::Dropout drop{nullptr};
  torch::nn::ModuleList h{nullptr};
  LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Transformer);

// Holds the output projection's matrix; when tied, `weight` is the embedding tensor itself.
struct LMHeadImpl : torch::nn::Module {
  explicit LMHeadImpl(torch::Tensor w) { weight = register_parameter("weight", std::move(w)); }
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

  // Each target's own loss, (B, T) float32 (float64 for a float64 model), 0 where the
  // target is -1: the terms forward's loss averages, from the same LM-head path the
  // runtime picks for it (the fused kernel, chunks, or whole logits), so that their
  // mean over targets != -1 is forward's loss. For evaluation: no gradient flows.
  torch::Tensor token_losses(const torch::Tensor& idx, const torch::Tensor& targets);

  // The residual stream entering block 0: ln_e([sink; wte(idx)]), (B, S+T, d_model)
  // with S = n_sink if with_sinks else 0.
  torch::Tensor embed(const torch::Tensor& idx, bool with_sinks);

  // μP's factor on each hidden matrix's AdamW rate (model/mup.h); empty under "sp".
  std::map<std::string, double> rate_scales() const;

  // Parameters without the tied duplicate, in registration order.
  std::vector<std::pair<std::string, torch::Tensor>> unique_named_parameters() const;
  std::vector<torch::Tensor> unique_parameters() const;

  // How to run (kernels, activation checkpointing, loss chunk, compute dtype;
  // config/runtime.h), and runs every forward pass in it. The default runs every
  // op through ATen in float32.
  void set_runtime(const Runtime& rt);
  const Runtime& runtime() const { return exec_->rt; }
  // The precision scope forward opens itself. A caller that runs many small forward
  // passes (generation) may hold one around them: scopes nest, and autocast then
  // casts each weight to bf16 once, not once per pass.
  auto precision_scope(torch::Device device) const { return exec_->scope(device); }
  // After the parameters changed in place (an optimizer step, loaded weights):
  // the bf16 weight copies of the weights kernel and the FP8 ones of fp8 are made again.
  void parameters_changed() { exec_->refresh(); }

  ModelConfig cfg;
  Transformer transformer{nullptr};
  LMHead lm_head{nullptr};
  torch::Tensor rope_cos, rope_sin;  // buffers, (n_sink + block_size, head_dim/2)

 private:
  void init_weights();
  // ln_f of the last block's output at the token positions, (B, T, d_model).
  torch::Tensor hidden(const torch::Tensor& idx, KVCache* cache);
  torch::Tensor loss(const torch::Tensor& h, const torch::Tensor& targets);
  ExecPtr exec_ = std::make_shared<Exec>();
};
TORCH_MODULE(GPT);

}  // namespace xsagpt
