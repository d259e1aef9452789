#include "sample/generate.h"

#include "model/kv_cache.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <stdexcept>

namespace xsagpt {

int64_t sample_token(const torch::Tensor& logits, const SampleOptions& opts, at::Generator& gen) {
  auto l = logits.detach().to(torch::kCPU, torch::kFloat32).reshape(-1).clone();
  const int64_t V = l.size(0);
  if (opts.vocab_limit > 0 && opts.vocab_limit < V)
    l.narrow(0, opts.vocab_limit, V - opts.vocab_limit).fill_(-INFINITY);
  if (opts.temperature == 0) return l.argmax().item<int64_t>();
  // In float64 and shifted so that the largest logit is 0 before dividing: a tiny
  // temperature (1e-40) then sends the others to -inf instead of every logit to
  // +-inf (whose softmax is NaN), and the draw tends to greedy as it should.
  auto s = l.to(torch::kFloat64);
  s = (s - s.max()) / opts.temperature;
  if (opts.top_k > 0 && opts.top_k < V) {
    auto kth = std::get<0>(s.topk(opts.top_k)).min();
    s.masked_fill_(s < kth, -INFINITY);
  }
  // Inverse CDF with one uniform draw: id i owns [cdf[i-1], cdf[i]), so ids cut
  // above (probability 0) own empty intervals and are never drawn.
  auto cdf = torch::softmax(s, 0).cumsum(0);
  auto u = torch::rand({1}, gen, torch::kFloat64) * cdf[-1];
  return torch::searchsorted(cdf, u, /*out_int32=*/false, /*right=*/true).item<int64_t>();
}

std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const SampleOptions& opts,
                              const std::function<void(int64_t)>& on_token, const std::function<bool()>& stop) {
  if (prompt.empty()) throw std::invalid_argument("generate: the prompt needs at least one token");
  if (opts.temperature < 0 || !std::isfinite(opts.temperature))
    throw std::invalid_argument("generate: temperature must be >= 0");
  torch::NoGradGuard no_grad;
  model->eval();
  const auto device = model->parameters().front().device();
  const int64_t block = model->cfg.block_size, keep = std::max<int64_t>(1, block / 2);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(opts.seed);
  KVCache cache(model->cfg);
  const auto precision = model->precision_scope(device);  // bf16 weight casts made once, not per token

  std::vector<int64_t> tokens = prompt, out;
  auto ids = [&](size_t from) {
    std::vector<int64_t> part(tokens.begin() + static_cast<ptrdiff_t>(from), tokens.end());
    return torch::tensor(part, torch::kLong).view({1, -1}).to(device);
  };
  size_t start = tokens.size() > static_cast<size_t>(block) ? tokens.size() - block : 0;  // window start
  size_t cached = start;  // tokens [start, cached) are in the cache
  for (int64_t n = 0; n < opts.max_new_tokens; ++n) {
    if (tokens.size() - start > static_cast<size_t>(block)) {
      start = tokens.size() - keep;
      cache.clear();
      cached = start;
    }
    torch::Tensor logits;
    if (opts.use_cache) {
      logits = model->forward(ids(cached), {}, &cache).logits;
      cached = tokens.size();
    } else {
      logits = model->forward(ids(start)).logits;
    }
    const int64_t next = sample_token(logits[0][-1], opts, gen);
    tokens.push_back(next);
    out.push_back(next);
    if (on_token) on_token(next);
    if (stop && stop()) break;
  }
  return out;
}

}  // namespace xsagpt
