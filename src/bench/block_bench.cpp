#include "bench/block_bench.h"

#include "bench/peak_memory.h"
#include "bench/timing.h"
#include "distributed/context.h"
#include "model/counts.h"
#include "model/gpt.h"
#include "model/rope.h"
#include "train/step.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <functional>
#include <optional>

namespace xsagpt {

namespace {

struct Case {
  std::function<void()> reset, iteration;  // reset: drop the gradients of the previous iteration
};

Timing summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  Timing t;
  t.median_ms = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  t.min_ms = ms.front();
  return t;
}

double time_ms(const torch::Device& device, const std::function<void()>& f) {
  sync_device(device);
  const auto t0 = std::chrono::steady_clock::now();
  f();
  sync_device(device);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The process's CPU time in ms (all its threads).
double process_cpu_ms() { return 1e3 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// All cases alive at once, iterations interleaved.
Results measure_interleaved(const BenchOptions& o, const std::vector<Case>& cases) {
  for (int64_t i = 0; i < o.warmup; ++i)
    for (const auto& c : cases) c.reset(), c.iteration();
  std::vector<std::vector<double>> ms(cases.size());
  for (int64_t i = 0; i < o.iters; ++i)
    for (size_t k = 0; k < cases.size(); ++k) {
      cases[k].reset();
      ms[k].push_back(time_ms(o.device, cases[k].iteration));
    }
  Results r;
  for (size_t k = 0; k < cases.size(); ++k) {
    auto t = summarize(ms[k]);
    cases[k].reset();
    PeakMemory pm(o.device);
    cases[k].iteration();
    t.peak_bytes = pm.peak_bytes();
    r[o.variants[k]] = t;
  }
  return r;
}

// Whether XSA's implementations (XsaImpl: the kernel row a kind names sets one) run a kind's step.
bool served_by_xsa_kernels(const AttentionKind& k) {
  return *k.kernel && parse_kernels(k.kernel, /*cuda=*/true).xsa != XsaImpl::kOps;
}

// XSA's implementations a variant may force, by the suffix after its attention's name.
constexpr std::array<std::pair<const char*, XsaImpl>, 3> kForcedXsaImpls{
    {{"ops", XsaImpl::kOps}, {"fused", XsaImpl::kFused}, {"autograd", XsaImpl::kComposed}}};

}  // namespace

std::vector<std::string> default_bench_variants() {
  std::vector<std::string> out{attention_kinds().front().name};
  for (const auto& k : attention_kinds())
    if (served_by_xsa_kernels(k)) {
      out.insert(out.end(), {k.name, std::string(k.name) + "-autograd"});
      break;
    }
  return out;
}

BenchVariant parse_bench_variant(const std::string& variant) {
  auto fail = [&]() -> ConfigError {
    return ConfigError(
        fmt::format("bench variant \"{}\": expected an attention ({}), one the XSA kernels serve optionally with "
                    "-ops, -fused or -autograd, then optionally @KERNELS",
                    variant, attention_kind_choices()));
  };
  BenchVariant v;
  std::string head = variant;
  if (const auto at = variant.find('@'); at != std::string::npos) {
    head = variant.substr(0, at);
    v.kernels = variant.substr(at + 1);
  }
  const auto dash = head.find('-');
  v.kind = head.substr(0, dash);
  const auto* kind = find_attention_kind(v.kind);
  if (!kind) throw fail();
  if (dash == std::string::npos) return v;
  if (!served_by_xsa_kernels(*kind)) throw fail();  // the suffixes choose how XSA's step runs
  for (const auto& [suffix, impl] : kForcedXsaImpls)
    if (head.substr(dash + 1) == suffix) v.xsa_impl = impl;
  if (!v.xsa_impl) throw fail();
  return v;
}

ModelConfig variant_config(ModelConfig c, const std::string& variant) {
  c.set_attention(parse_bench_variant(variant).kind);  // its keys at their defaults
  c.dropout = 0.0;
  return c;
}

Runtime variant_runtime(Runtime base, const std::string& variant, bool cuda) {
  const auto v = parse_bench_variant(variant);  // rejects unknown names
  if (!v.kernels.empty()) {
    auto kernels = v.kernels;
    std::replace(kernels.begin(), kernels.end(), '+', ',');
    base.kernels = parse_kernels(kernels, cuda, "bench variant \"" + variant + "\"");
  }
  if (v.xsa_impl) base.kernels.xsa = *v.xsa_impl;
  return base;
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
    auto exec = std::make_shared<Exec>();
    exec->set_runtime(variant_runtime(o.runtime, v, o.device.is_cuda()));
    torch::manual_seed(1);  // the same weights for every variant
    Block block(cfg, 0, exec);
    block->to(o.device);
    blocks.push_back(block);
    cases.push_back({[&x, b = block.get()] {
                       b->zero_grad(/*set_to_none=*/true);
                       x.mutable_grad().reset();
                     },
                     [&o, &x, &grad_out, &cos, &sin, b = block.get()] {
                       torch::Tensor out;
                       {
                         const auto precision = b->exec->scope(o.device);  // as GPTImpl::forward opens it
                         Residual r(x, *b->exec);
                         b->forward(r, cos, sin);
                         out = r.flush();
                       }
                       out.backward(grad_out.to(out.scalar_type()));
                     }});
  }
  return measure_interleaved(o, cases);
}

double step_flop_rate(const RunConfig& config, const torch::Device& device, int64_t world_size) {
  BenchOptions o;
  o.device = device;
  o.train = config.train;
  o.runtime = runtime_of(config.train, device.is_cuda());
  o.warmup = 1;
  o.iters = 2;
  o.accumulation = config.accumulation_steps(world_size);
  o.variants = {config.model.attention};
  const auto r = bench_train_step(o, config.model, config.train.micro_batch, config.train.seq_len);
  const double tokens = static_cast<double>(config.train.micro_batch * config.train.seq_len * o.accumulation);
  return tokens / (r.begin()->second.median_ms / 1e3) * flops_per_token(config.model, config.train.seq_len);
}

TrainingParts bench_training_parts(const BenchOptions& o, const ModelConfig& model, const std::string& variant,
                                   DistContext& dist) {
  auto cfg = variant_config(model, variant);
  cfg.validate("bench --step-config");
  return build_training(cfg, o.train, variant_runtime(o.runtime, variant, o.device.is_cuda()), o.device, dist);
}

Results bench_train_step(const BenchOptions& o, const ModelConfig& model, int64_t micro_batch, int64_t seq_len) {
  if (seq_len > model.block_size)
    throw ConfigError("bench: --step-seq-len " + std::to_string(seq_len) + " exceeds the model's block_size " +
                      std::to_string(model.block_size));
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(o.device);
  torch::manual_seed(0);
  const auto x = torch::randint(0, model.vocab_size, {micro_batch, seq_len}, opts);
  const auto y = torch::randint(0, model.vocab_size, {micro_batch, seq_len}, opts);
  const NextBatch next = [&] { return std::pair{x, y}; };
  DistContext single;  // one process: the trainer's collectives are identities
  // Variants that differ only in their kernels share one model per round, its runtime
  // switched between them: building a model draws its weights from the CPU's one
  // generator stream (about 10 s at 0.7B), which had dominated a many-variant bench.
  // One model is alive at a time, so the variants of one attention run back to back.
  std::vector<std::string> order = o.variants;
  std::stable_sort(order.begin(), order.end(), [](const std::string& a, const std::string& b) {
    return parse_bench_variant(a).kind < parse_bench_variant(b).kind;
  });
  std::map<std::string, std::vector<double>> all_ms, cpu_ms;
  Results r;
  for (int64_t round = 0; round < o.repeat; ++round) {
    std::optional<TrainingParts> parts;
    for (const auto& v : order) {
      if (!parts || parse_bench_variant(v).kind != parts->model->cfg.attention) {
        parts.reset();  // the last model's memory goes before the next is built
        parts.emplace(bench_training_parts(o, model, v, single));
      }
      parts->model->set_runtime(variant_runtime(o.runtime, v, o.device.is_cuda()));  // drops the last one's copies
      TrainStep step(parts->model, *parts->optimizer, *parts->sync, parts->params, o.accumulation, o.train.grad_clip);
      auto iteration = [&] { step(next, 1e-4); };
      // The first step allocates AdamW's state and the new runtime's buffers: always warm up.
      for (int64_t i = 0; i < std::max<int64_t>(1, o.warmup); ++i) iteration();
      std::vector<double> ms;
      for (int64_t i = 0; i < o.iters; ++i) {
        const double cpu0 = process_cpu_ms();
        ms.push_back(time_ms(o.device, iteration));
        cpu_ms[v].push_back(process_cpu_ms() - cpu0);
      }
      r[v].round_ms.push_back(summarize(ms).median_ms);
      all_ms[v].insert(all_ms[v].end(), ms.begin(), ms.end());
      if (round + 1 < o.repeat) continue;
      PeakMemory pm(o.device);
      iteration();
      r[v].peak_bytes = pm.peak_bytes();
    }
  }
  for (auto& [v, t] : r) {
    const auto s = summarize(all_ms[v]);
    t.median_ms = s.median_ms;
    t.min_ms = s.min_ms;
    if (o.device.is_cpu()) {
      const auto c = summarize(cpu_ms[v]);
      t.cpu_median_ms = c.median_ms;
      t.cpu_min_ms = c.min_ms;
    }
  }
  return r;
}

Results bench_optimizer_step(const BenchOptions& o, const ModelConfig& model) {
  DistContext single;
  Results r;
  auto built = bench_training_parts(o, model, o.variants.front(), single);  // one model for both optimizers
  for (const auto optimizer : {Optimizer::kAdamW, Optimizer::kMuon}) {
    TrainConfig train = o.train;
    train.optimizer = optimizer;
    train.shard_optimizer = false;  // one process: nothing to shard
    auto parts = build_training(built.model, train, single);
    torch::manual_seed(0);
    for (auto& p : parts.params) p.mutable_grad() = torch::randn_like(p) * 1e-3;
    auto iteration = [&] { parts.optimizer->step(1e-4); };
    for (int64_t i = 0; i < std::max<int64_t>(1, o.warmup); ++i) iteration();
    std::vector<double> ms;
    for (int64_t i = 0; i < o.iters; ++i) ms.push_back(time_ms(o.device, iteration));
    r[name(optimizer)] = summarize(ms);
  }
  return r;
}

nlohmann::json to_json(const Timing& t) {
  nlohmann::json j = {{"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"peak_bytes", t.peak_bytes}};
  if (!t.round_ms.empty()) j["round_ms"] = t.round_ms;
  if (t.cpu_median_ms > 0) j["cpu"] = {{"median_ms", t.cpu_median_ms}, {"min_ms", t.cpu_min_ms}};
  return j;
}

}  // namespace xsagpt
