#include "bench/block_bench.h"

#include "bench/peak_memory.h"
#include "model/gpt.h"
#include "model/rope.h"
#include "model/xsa.h"
#include "train/grad_clip.h"
#include "train/optimizer.h"
#include "train/precision.h"

#include <algorithm>
#include <chrono>
#include <functional>

#ifdef XSAGPT_CUDA
#include <torch/cuda.h>
#endif

namespace xsagpt {

namespace {

void sync(const torch::Device& d) {
#ifdef XSAGPT_CUDA
  if (d.is_cuda()) torch::cuda::synchronize(d.index());
#endif
}

struct Case {
  std::function<void()> reset, iteration;  // reset: drop the gradients of the previous iteration
};

Results measure(const BenchOptions& o, const std::vector<std::string>& names, const std::vector<Case>& cases) {
  for (int64_t i = 0; i < o.warmup; ++i)
    for (const auto& c : cases) c.reset(), c.iteration();
  std::vector<std::vector<double>> ms(cases.size());
  for (int64_t i = 0; i < o.iters; ++i) {
    for (size_t k = 0; k < cases.size(); ++k) {
      cases[k].reset();
      sync(o.device);
      const auto t0 = std::chrono::steady_clock::now();
      cases[k].iteration();
      sync(o.device);
      ms[k].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  Results r;
  for (size_t k = 0; k < cases.size(); ++k) {
    auto& m = ms[k];
    std::sort(m.begin(), m.end());
    Timing t;
    t.median_ms = m.size() % 2 ? m[m.size() / 2] : (m[m.size() / 2 - 1] + m[m.size() / 2]) / 2;
    t.min_ms = m.front();
    cases[k].reset();
    PeakMemory pm(o.device);
    cases[k].iteration();
    t.peak_bytes = pm.peak_bytes();
    r[names[k]] = t;
  }
  return r;
}

void check_variant(const std::string& v) {
  if (v != "sa" && v != "xsa" && v != "xsa-fused" && v != "xsa-autograd")
    throw ConfigError("bench variant \"" + v + "\": expected sa, xsa, xsa-fused or xsa-autograd");
}

}  // namespace

ModelConfig variant_config(ModelConfig c, const std::string& variant) {
  check_variant(variant);
  c.attention = variant == "sa" ? "sa" : "xsa";
  c.xsa_layers = nullptr;
  c.xsa_gate = "off";
  c.dropout = 0.0;
  return c;
}

Results bench_block(const BenchOptions& o, int64_t seq_len, int64_t d_model) {
  if (d_model % o.head_dim != 0)
    throw ConfigError("bench: width " + std::to_string(d_model) + " is not a multiple of --head-dim " +
                      std::to_string(o.head_dim));
  ModelConfig base;
  base.block_size = seq_len;
  base.n_layer = 1;
  base.d_model = d_model;
  base.head_dim = o.head_dim;
  base.n_head = d_model / o.head_dim;
  base.mlp_ratio = o.mlp_ratio;

  auto [cos, sin] = rope_tables(seq_len, o.head_dim, base.rope_theta, o.device);
  torch::manual_seed(0);
  auto x = torch::randn({o.batch, seq_len, d_model}, torch::TensorOptions().device(o.device)).requires_grad_(true);
  auto grad_out = torch::randn_like(x);
  std::vector<Block> blocks;
  std::vector<Case> cases;
  for (const auto& v : o.variants) {
    auto cfg = variant_config(base, v);
    cfg.validate("bench");
    torch::manual_seed(1);  // the same weights for every variant
    Block block(cfg, 0);
    block->to(o.device);
    if (v == "xsa-autograd") block->attn->xsa_step = exclude_self_value_autograd;
    if (v == "xsa-fused") block->attn->xsa_step = exclude_self_value_fused;
    blocks.push_back(block);
    cases.push_back({[&x, b = block.get()] {
                       b->zero_grad(/*set_to_none=*/true);
                       x.mutable_grad().reset();
                     },
                     [&o, &x, &grad_out, &cos, &sin, b = block.get()] {
                       torch::Tensor out;
                       {
                         AutocastGuard ac(o.device, o.bf16);
                         out = b->forward(x, cos, sin);
                       }
                       out.backward(grad_out.to(out.scalar_type()));
                     }});
  }
  return measure(o, o.variants, cases);
}

Results bench_train_step(const BenchOptions& o, const ModelConfig& model, int64_t micro_batch, int64_t seq_len) {
  if (seq_len > model.block_size)
    throw ConfigError("bench: --step-seq-len " + std::to_string(seq_len) + " exceeds the model's block_size " +
                      std::to_string(model.block_size));
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(o.device);
  torch::manual_seed(0);
  auto x = torch::randint(0, model.vocab_size, {micro_batch, seq_len}, opts);
  auto y = torch::randint(0, model.vocab_size, {micro_batch, seq_len}, opts);
  std::vector<GPT> models;
  std::vector<std::unique_ptr<AdamW>> optimizers;
  std::vector<Case> cases;
  for (const auto& v : o.variants) {
    auto cfg = variant_config(model, v);
    cfg.validate("bench --step-config");
    torch::manual_seed(1);
    GPT gpt(cfg);
    gpt->to(o.device);
    gpt->train();
    gpt->set_memory_options(o.recompute, o.loss_chunk);
    if (v == "xsa-autograd")
      for (auto& b : *gpt->transformer->h) b->as<Block>()->attn->xsa_step = exclude_self_value_autograd;
    if (v == "xsa-fused") gpt->set_xsa_kernel("fused");
    models.push_back(gpt);
    optimizers.push_back(std::make_unique<AdamW>(gpt->unique_named_parameters(), AdamWConfig{}));
    AdamW* opt = optimizers.back().get();
    cases.push_back({[opt] { opt->zero_grad(); },
                     [&o, &x, &y, g = gpt.get(), opt] {
                       torch::Tensor loss;
                       {
                         AutocastGuard ac(o.device, o.bf16);
                         loss = g->forward(x, y).loss;
                       }
                       loss.backward();
                       clip_grad_norm(opt->params(), 1.0);
                       opt->step(1e-4);
                     }});
  }
  // The first step allocates the torch AdamW's state: always warm up at least once.
  BenchOptions warm = o;
  warm.warmup = std::max<int64_t>(1, o.warmup);
  return measure(warm, o.variants, cases);
}

nlohmann::json to_json(const Timing& t) {
  return {{"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"peak_bytes", t.peak_bytes}};
}

}  // namespace xsagpt
