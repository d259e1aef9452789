#include "model/gpt.h"

#include "model/chunked_loss.h"
#include "model/recompute.h"
#include "model/rope.h"

#include <cmath>
#include <unordered_set>

namespace xsagpt {

BlockImpl::BlockImpl(const ModelConfig& cfg, int64_t layer) {
  ln_1 = register_module("ln_1", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  attn = register_module("attn", CausalSelfAttention(cfg, layer));
  ln_2 = register_module("ln_2", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  mlp = register_module("mlp", MLP(cfg.d_model, cfg.mlp_dim(), cfg.bias, cfg.dropout));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto h = x + attn(ln_1(x), cos, sin);
  if (recompute_mlp) return h + recompute_in_backward([this](const torch::Tensor& t) { return mlp(ln_2(t)); }, h);
  return h + mlp(ln_2(h));
}

TransformerImpl::TransformerImpl(const ModelConfig& cfg) {
  wte = register_module("wte", torch::nn::Embedding(cfg.vocab_size, cfg.d_model));
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
  auto [cos, sin] = rope_tables(cfg.block_size, cfg.head_dim, cfg.rope_theta);
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
    } else if (name.find("ln_") != std::string::npos) {
      p.fill_(1.0);
    } else if (name.ends_with("c_proj.weight")) {
      p.normal_(0.0, proj_std);
    } else {
      p.normal_(0.0, 0.02);  // wte, c_attn, c_fc, untied lm_head
    }
  }
}

GPTOutput GPTImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets) {
  const auto T = idx.size(1);
  TORCH_CHECK(T <= cfg.block_size, "sequence length ", T, " exceeds model.block_size ", cfg.block_size);
  auto cos = rope_cos.narrow(0, 0, T);
  auto sin = rope_sin.narrow(0, 0, T);

  auto x = transformer->drop(transformer->ln_e(transformer->wte(idx)));
  for (const auto& module : *transformer->h) {
    auto* block = module->as<Block>();
    auto run = [block, cos, sin](const torch::Tensor& t) { return block->forward(t, cos, sin); };  // outlives forward()
    x = recompute_blocks_ ? recompute_in_backward(run, x) : run(x);
  }
  auto h = transformer->ln_f(x);

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

void GPTImpl::set_memory_options(const std::string& recompute, int64_t loss_chunk) {
  TORCH_CHECK(recompute == "none" || recompute == "mlp" || recompute == "block",
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
