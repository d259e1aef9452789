#include "model/gpt.h"

#include "config/kernel_fit.h"
#include "kernels/lm_head_loss.h"
#include "model/chunked_loss.h"
#include "model/mup.h"
#include "model/recompute.h"
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace xsagpt {

BlockImpl::BlockImpl(const ModelConfig& cfg, int64_t layer, ExecPtr exec_) : exec(std::move(exec_)) {
  TORCH_CHECK(exec, "Block: needs the runtime it runs in (an Exec); GPT passes its own");
  ln_1 = register_module("ln_1", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  attn = register_module("attn", CausalSelfAttention(cfg, layer, exec));
  ln_2 = register_module("ln_2", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  mlp = register_module("mlp", MLP(cfg.d_model, cfg.mlp_dim(), cfg.bias, cfg.dropout, exec, cfg.gelu));
}

void BlockImpl::forward(Residual& x, const torch::Tensor& cos, const torch::Tensor& sin, KVCache::Layer* cache,
                        int64_t past) {
  // Each norm is told which product reads it, and each branch which product made it:
  // an FP8 product takes its amaxes from the norm kernel's passes (kernels/amax_handoff.h).
  x.add(attn(x.norm(ln_1, attn->c_attn->weight), cos, sin, cache, past), attn->c_proj->weight);
  if (exec->rt.recompute == Recompute::kMlp)  // activation checkpointing of the MLP half (its norm included)
    x.add(recompute_in_backward([this](const torch::Tensor& t) { return mlp(exec->norm(ln_2, t, mlp->c_fc->weight)); },
                                x.flush()),
          mlp->c_proj->weight);
  else
    x.add(mlp(x.norm(ln_2, mlp->c_fc->weight)), mlp->c_proj->weight);
}

TransformerImpl::TransformerImpl(const ModelConfig& cfg, const ExecPtr& exec) {
  wte = register_module("wte", torch::nn::Embedding(cfg.vocab_size, cfg.d_model));
  if (cfg.n_sink > 0) sink = register_parameter("sink", torch::empty({cfg.n_sink, cfg.d_model}));
  ln_e = register_module("ln_e", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
  drop = register_module("drop", torch::nn::Dropout(cfg.dropout));
  h = register_module("h", torch::nn::ModuleList());
  for (int64_t i = 0; i < cfg.n_layer; ++i) h->push_back(Block(cfg, i, exec));
  ln_f = register_module("ln_f", LayerNorm(cfg.d_model, cfg.bias, cfg.norm_eps));
}

GPTImpl::GPTImpl(ModelConfig config) : cfg(std::move(config)) {
  cfg.validate();
  transformer = register_module("transformer", Transformer(cfg, exec_));
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
  const HeadInit init = cfg.head_init;
  // An attention kind's parameters start as its step says, in their place in the order.
  auto kind_init = [&](const std::string& name, torch::Tensor& p) {
    const std::string prefix = "transformer.h.";
    const auto attn = name.find(".attn.");
    if (!name.starts_with(prefix) || attn == std::string::npos) return false;
    const auto layer = std::stoll(name.substr(prefix.size(), attn - prefix.size()));
    const auto& step = transformer->h[layer]->as<Block>()->attn->step;
    return step && step->init(name.substr(attn + 6), p);
  };
  // Each tensor once: a tied head is wte itself, initialised as the embedding.
  for (auto& [name, p] : unique_named_parameters()) {
    if (kind_init(name, p)) {
      continue;
    } else if (name.ends_with(".bias")) {
      p.zero_();
    } else if (name == "transformer.ln_f.weight" && init == HeadInit::kZeroNorm) {
      p.zero_();  // logits = 0 at the start; the gain's own gradient is not zero, so it grows
    } else if (name.find("ln_") != std::string::npos) {
      p.fill_(1.0);
    } else if (name.ends_with("c_proj.weight")) {
      p.normal_(0.0, proj_std);
    } else if (name == "lm_head.weight" && !cfg.tie_embeddings) {
      if (init == HeadInit::kZero) {
        p.zero_();  // uniform predictions at the start: loss ln(vocab) at any width
      } else {      // nanoGPT's 0.02, capped so the logits of ln_f's unit-variance output have std <= 0.5
        p.normal_(0.0, std::min(0.02, 0.5 / std::sqrt(static_cast<double>(cfg.head_init_width()))));
      }
    } else if (name == "transformer.wte.weight" && cfg.tie_embeddings && init == HeadInit::kScaled) {
      // Behind ln_e, the embedding's scale matters only to the tied head, where a
      // token's self-logit starts at LN(e).e ~ std * d_model: 0.5 nats here.
      p.normal_(0.0, 0.5 / static_cast<double>(cfg.head_init_width()));
    } else {
      p.normal_(0.0, 0.02);  // wte, sink, c_attn, c_fc
    }
  }
  // Under μP the hidden matrices start as above over sqrt(m), whatever start their
  // module or kind gave them (model/mup.h); the head's start is the base width's, and
  // the logits' 1/m is hidden()'s.
  const auto scales = mup_init_scales(cfg, unique_named_parameters());
  for (auto& [name, p] : unique_named_parameters())
    if (const auto it = scales.find(name); it != scales.end()) p.mul_(it->second);
}

torch::Tensor GPTImpl::embed(const torch::Tensor& idx, bool with_sinks) {
  auto x = transformer->wte(idx);
  if (with_sinks && cfg.n_sink > 0)
    x = torch::cat({transformer->sink.expand({idx.size(0), cfg.n_sink, cfg.d_model}), x}, 1);
  return transformer->ln_e(x);
}

GPTOutput GPTImpl::forward(const torch::Tensor& idx, const torch::Tensor& targets, KVCache* cache) {
  const auto precision = exec_->scope(idx.device());  // bf16 autocast when the runtime asks for it
  auto h = hidden(idx, cache);

  GPTOutput out;
  if (targets.defined() && (exec_->rt.kernels.loss || exec_->rt.loss_chunk > 0)) {
    out.loss = loss(h, targets);
    return out;
  }
  out.logits = exec_->linear(h, lm_head->weight);
  if (targets.defined()) {
    namespace F = torch::nn::functional;
    const auto acc = at::promote_types(out.logits.scalar_type(), torch::kFloat32);  // float32, float64 for float64
    out.loss = F::cross_entropy(out.logits.reshape({-1, out.logits.size(-1)}).to(acc), targets.reshape(-1),
                                F::CrossEntropyFuncOptions().ignore_index(-1));
  }
  return out;
}

torch::Tensor GPTImpl::token_losses(const torch::Tensor& idx, const torch::Tensor& targets) {
  TORCH_CHECK(targets.sizes() == idx.sizes(), "token_losses: targets ", targets.sizes(), " for idx ", idx.sizes());
  torch::NoGradGuard no_grad;
  const auto precision = exec_->scope(idx.device());
  const auto h = hidden(idx, nullptr);
  const auto& rt = exec_->rt;
  const auto& w = lm_head->weight;
  auto h2 = h.reshape({-1, h.size(-1)});
  const auto t2 = targets.reshape(-1);
  torch::Tensor rows;  // the branches of forward and loss(), each without its mean
  if (rt.kernels.loss) {
    rows = lm_head_token_losses(h2, exec_->weight(w), t2, rt.loss_chunk);
  } else if (rt.loss_chunk > 0) {
    if (exec_->copies()) h2 = h2.to(torch::kBFloat16);
    rows = chunked_token_losses(h2, w, t2, rt.loss_chunk);
  } else {
    namespace F = torch::nn::functional;
    const auto logits = exec_->linear(h, w);  // as forward makes them, (B, T, V)
    const auto acc = at::promote_types(logits.scalar_type(), torch::kFloat32);
    rows = F::cross_entropy(logits.reshape({-1, logits.size(-1)}).to(acc), t2,
                            F::CrossEntropyFuncOptions().ignore_index(-1).reduction(torch::kNone));
  }
  return rows.view(targets.sizes());
}

torch::Tensor GPTImpl::hidden(const torch::Tensor& idx, KVCache* cache) {
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

  Residual x(transformer->drop(embed(idx, S > 0)), *exec_);
  for (size_t i = 0; i < transformer->h->size(); ++i) {
    auto* block = transformer->h[i]->as<Block>();
    if (exec_->rt.recompute == Recompute::kBlock && !cache) {               // activation checkpointing (training)
      auto run = [block, cos, sin, exec = exec_](const torch::Tensor& t) {  // captures outlive forward()
        Residual r(t, *exec);
        block->forward(r, cos, sin);
        return r.flush();
      };
      x = Residual(recompute_in_backward(run, x.flush()), *exec_);
    } else {
      block->forward(x, cos, sin, cache ? &cache->layers[i] : nullptr, past);
    }
  }
  if (cache) cache->length = past + S + T;
  auto h = x.norm(transformer->ln_f);
  if (S > 0) h = h.narrow(1, S, T);  // sinks predict nothing (a narrow's backward zero-fills a copy)
  // μP's output multiplier 1/m, on the head's input so that every head path (whole
  // logits, chunks, the fused loss) takes it: logits = W (h / m).
  return cfg.width_multiplier() == 1.0 ? h : h * cfg.logit_scale();
}

// The LM head's loss without the full logits: fused with its gradient (kernels/
// lm_head_loss.h), or chunked with the logits recomputed in backward (chunked_loss.h).
torch::Tensor GPTImpl::loss(const torch::Tensor& h, const torch::Tensor& targets) {
  const auto& rt = exec_->rt;
  const auto& w = lm_head->weight;
  auto h2 = h.reshape({-1, h.size(-1)});
  auto t2 = targets.reshape(-1);
  if (rt.kernels.loss) return lm_head_loss(h2, w, exec_->weight(w), t2, rt.loss_chunk);
  if (exec_->copies()) h2 = h2.to(torch::kBFloat16);
  return chunked_cross_entropy(h2, w, t2, rt.loss_chunk);
}

void GPTImpl::set_runtime(const Runtime& rt) {
  check_kernels_fit_model(rt.kernels, cfg);  // every caller, not only train: bench, eval, the tests
  exec_->set_runtime(rt);
}

std::map<std::string, double> GPTImpl::rate_scales() const { return mup_rate_scales(cfg, unique_named_parameters()); }

std::vector<std::pair<std::string, torch::Tensor>> GPTImpl::unique_named_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : named_parameters(/*recurse=*/true)) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.emplace_back(item.key(), item.value());
  }
  return out;
}

std::vector<torch::Tensor> GPTImpl::unique_parameters() const {
  std::vector<torch::Tensor> out;
  for (auto& [name, p] : unique_named_parameters()) out.push_back(p);
  return out;
}

}  // namespace xsagpt
