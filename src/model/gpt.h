// The GPT of the paper: nanoGPT with RoPE instead of learned positions and a
// LayerNorm right after the token embedding.
//
//   x = ln_e(wte(idx))
//   for each block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
//   logits = lm_head(ln_f(x))          (lm_head tied to wte by default)
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
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
  LayerNorm ln_1{nullptr}, ln_2{nullptr};
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};
};
TORCH_MODULE(Block);

struct TransformerImpl : torch::nn::Module {
  explicit TransformerImpl(const ModelConfig& cfg);
  torch::nn::Embedding wte{nullptr};
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
  torch::Tensor logits;  // (B, T, vocab)
  torch::Tensor loss;    // mean cross-entropy over targets != -1; undefined without targets
};

struct GPTImpl : torch::nn::Module {
  explicit GPTImpl(ModelConfig cfg);

  // idx: int64 (B, T) with T <= block_size; targets: int64 (B, T) or undefined.
  GPTOutput forward(const torch::Tensor& idx, const torch::Tensor& targets = {});

  // Parameters without the tied duplicate, in registration order.
  std::vector<std::pair<std::string, torch::Tensor>> unique_named_parameters() const;

  ModelConfig cfg;
  Transformer transformer{nullptr};
  LMHead lm_head{nullptr};
  torch::Tensor rope_cos, rope_sin;  // buffers, (block_size, head_dim/2)

 private:
  void init_weights();
};
TORCH_MODULE(GPT);

}  // namespace xsagpt
