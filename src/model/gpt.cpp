#include "model/gpt.h"

#include "model/chunked_loss.h"
#include "model/recompute.h"
#include "model/rope.h"
#include "model/xsa.h"

#include <cmath>
#include <unordered_set>

namespace xsagpt {

BlockImpl::BlockImpl(const ModelConfig& cfg, int64_t layer) {
  ln_1 = register_module("ln_1", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  attn = register_module("attn", CausalSelfAttention(cfg, layer));
  ln_2 = register_module("ln_2", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  mlp = register_module("mlp", MLP(cfg.d_model, cfg.mlp_dim(), cfg.bias, cfg.dropout));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                                 KVCache::Layer* cache, int64_t past) {
  auto h = x + attn(ln_1(x), cos, sin, cache, past);
  if (recompute_mlp) return h + recompute_in_backward([this](const torch::Tensor& t) { return mlp(ln_2(t)); }, h);
  return h + mlp(ln_2(h));
}

TransformerImpl::TransformerImpl(const ModelConfig& cfg) {
  wte = register_module("wte", torch::nn::Embedding(cfg.vocab_size, cfg.d_model));
  if (cfg.n_sink > 0) sink = register_parameter("sink", torch::empty({cfg.n_sink, cfg.d_model}));
  ln_e = register_module("ln_e", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  drop = register_module("drop", torch::nn::Dropout(cfg.dropout));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.n_layer; ++i) h->push_back(Block(cfg, i));
  ln_f = register_module("ln_f", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
}

GPTImpl::GPTImpl(ModelConfig config) : cfg(std::move(config)) {
  cfg.validate();
  transformer = register_module("transformer", Transformer(cfg));
  auto head = cfg.tie_embeddings ? transformer->wte->weight : torch::empty({cfg.vocab_size, cfg.d_model});
  lm_head = register_module("lm_head", LMHead(head));
  auto [cos, sin] = rope_tables(cfg.n_sink + cfg.block_size, cfg.head_dim, cfg.rope_theta);
  rope_cos = register_buffer("rope_cos", cos);
  rope_sin = register_buffer("rope_sin", sin);
  init_weights();
}

void GPTImpl::init_weights() {
  torch::NoGradGuard no_grad;
  // nanoGPT: N(0, 0.02) everywhere, residual projections scaled by 1/sqrt(2 n_layer)
  // so the residual stream's variance does not grow with depth.
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(cfg.n_layer));
  for (auto& item : named_parameters(/*recurse=*/true)) {
    const auto& name = item.key();
    auto& p = item.value();
    if (name.ends_with(".bias")) {
      p.zero_();
    } else if (name.ends_with(".xsa_gate")) {
      p.fill_(cfg.xsa_gate == "xsa" ? kXsaGateInitXsa : 0.0);
    } else if (name.find("ln_") != std::string::npos) {
      p.fill_(1.0);
    } else if (name.ends_with("c_proj.weight")) {
      p.normal_(0.0, proj_std);
    } else {
      p.normal_(0.0, 0.02);  // wte, sink, c_attn, c_fc, untied lm_head
    }
  }
}

torch::Tensor GPTImpl::embed(const torch::Tensor& idx, bool with_sinks) {
  auto x = transformer->wte(idx);
  if (with_sinks && cfg.n_sink > 0)
    x = torch::cat({transformer->sink.expand({idx.size(0), cfg.n_sink, cfg.d_model}), x}, 1);
  return transformer->ln_e(x);
}

GPTOutput GPTImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets, KVCache* cache) {
  const auto T = idx.size(1);
  const int64_t past = cache ? cache->length : 0;
  const int64_t S = past == 0 ? cfg.n_sink : 0;  // sinks enter once, in front
  if (cache) {
    TORCH_CHECK(past + S + T <= cache->capacity, "KV cache holds ", cache->capacity, " positions; ", past,
                " are filled and ", S + T, " more do not fit");
  } else {
    TORCH_CHECK(T <= cfg.block_size, "sequence length ", T, " exceeds model.block_size ", cfg.block_size);
  }
  auto cos = rope_cos.narrow(0, past, S + T);
  auto sin = rope_sin.narrow(0, past, S + T);

  auto x = transformer->drop(embed(idx, S > 0));
  for (size_t i = 0; i < transformer->h->size(); ++i) {
    auto* block = transformer->h[i]->as<Block>();
    if (recompute_blocks_ && !cache) {  // activation checkpointing (training); captures outlive forward()
      x = recompute_in_backward([block, cos, sin](const torch::Tensor& t) { return block->forward(t, cos, sin); }, x);
    } else {
      x = block->forward(x, cos, sin, cache ? &cache->layers[i] : nullptr, past);
    }
  }
  if (cache) cache->length = past + S + T;
  auto h = transformer->ln_f(x.narrow(1, S, T));  // sinks predict nothing

  GPTOutput out;
  if (targets.defined() && loss_chunk_ > 0) {
    out.loss = chunked_cross_entropy(h.reshape({-1, h.size(-1)}), lm_head->weight, targets.reshape(-1), loss_chunk_);
    return out;
  }
  out.logits = lm_head(h);
  if (targets.defined()) {
    namespace F = torch::nn::functional;
    out.loss = F::cross_entropy(out.logits.reshape({-1, out.logits.size(-1)}).to(torch::kFloat32),
                                targets.reshape(-1), F::CrossEntropyFuncOptions().ignore_index(-1));
  }
  return out;
}

void GPTImpl::set_xsa_kernel(const std::string& kernel) {
  TORCH_CHECK(kernel == "ops" || kernel == "fused", "xsa kernel: expected ops or fused, got ", kernel);
  for (const auto& module : *transformer->h)
    module->as<Block>()->attn->xsa_step = kernel == "fused" ? exclude_self_value_fused : exclude_self_value;
}

void GPTImpl::set_memory_options(const std::string& recompute, int64_t loss_chunk) {
  TORCH_CHECK(is_recompute_mode(recompute),
              "activation checkpointing: expected none, mlp or block, got ", recompute);
  recompute_blocks_ = recompute == "block";
  for (const auto& module : *transformer->h) module->as<Block>()->recompute_mlp = recompute == "mlp";
  loss_chunk_ = loss_chunk;
}

std::vector<std::pair<std::string, torch::Tensor>> GPTImpl::unique_named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.emplace_back(item.key(), item.value());
  }
  return out;
}

}  // namespace xsagpt
