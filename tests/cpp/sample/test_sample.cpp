// Generation: the key/value cache reproduces the full forward pass, greedy
// decoding is the same with and without it (also across the context-window
// jump), and sampling honours its seed, temperature, top-k and vocabulary limit.
#include "helpers.h"
#include "model/gpt.h"
#include "model/kv_cache.h"
#include "sample/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

using namespace xsagpt;
using xsagpt::test::small_model;

namespace {

ModelConfig variant(const std::string& name) {
  if (name == "sa") return small_model("sa");
  auto c = small_model("xsa");
  if (name == "xsa-gate") c.set_attention("xsa", {{"xsa_gate", "sa"}});
  if (name == "xsa-sinks") c.n_sink = 2;
  if (name == "sa-sinks") c.attention = "sa", c.n_sink = 1;
  return c;
}

}  // namespace

class CacheKinds : public ::testing::TestWithParam<std::string> {};

TEST_P(CacheKinds, CachedStepsReproduceTheFullForward) {
  torch::manual_seed(0);
  GPT model(variant(GetParam()));
  model->eval();
  {  // a gate half way, so the gated variant is neither end
    torch::NoGradGuard ng;
    for (auto& p : model->named_parameters())
      if (p.key().ends_with("xsa_gate")) p.value().fill_(0.4);
  }
  torch::NoGradGuard ng;
  auto idx = torch::randint(0, 64, {2, 24}, torch::kLong);
  auto full = model->forward(idx).logits;
  KVCache cache(model->cfg);
  // A prompt of 5, a chunk of 3 after it (masked within the chunk), then one at a time.
  std::vector<torch::Tensor> parts{model->forward(idx.narrow(1, 0, 5), {}, &cache).logits,
                                   model->forward(idx.narrow(1, 5, 3), {}, &cache).logits};
  for (int64_t t = 8; t < 24; ++t) parts.push_back(model->forward(idx.narrow(1, t, 1), {}, &cache).logits);
  EXPECT_EQ(cache.length, model->cfg.n_sink + 24);
  auto cached = torch::cat(parts, 1);
  EXPECT_TRUE(torch::allclose(cached, full, 1e-5, 1e-5)) << (cached - full).abs().max().item<double>();
}

TEST_P(CacheKinds, GreedyWithCacheEqualsGreedyWithout) {
  torch::manual_seed(1);
  GPT model(variant(GetParam()));
  SampleOptions o;
  o.temperature = 0;
  o.max_new_tokens = 60;  // from a 5-token prompt, past block_size (32): the window jumps once
  const std::vector<int64_t> prompt{3, 14, 15, 9, 26};
  auto with = generate(model, prompt, o);
  o.use_cache = false;
  auto without = generate(model, prompt, o);
  EXPECT_EQ(with, without);
  ASSERT_EQ(with.size(), 60u);

  // Independent greedy reference for the part within one window: argmax of the
  // full forward over everything so far.
  torch::NoGradGuard ng;
  std::vector<int64_t> seq = prompt;
  for (int i = 0; i < 20; ++i) {
    auto logits = model->forward(torch::tensor(seq).view({1, -1})).logits;
    seq.push_back(logits[0][-1].argmax().item<int64_t>());
  }
  EXPECT_EQ(std::vector<int64_t>(seq.begin() + 5, seq.end()), std::vector<int64_t>(with.begin(), with.begin() + 20));
}

INSTANTIATE_TEST_SUITE_P(Sample, CacheKinds, ::testing::Values("sa", "xsa", "xsa-gate", "xsa-sinks", "sa-sinks"));

TEST(Sample, SeededSamplingIsReproducibleAndTheSeedMatters) {
  torch::manual_seed(2);
  GPT model(small_model("xsa"));
  SampleOptions o;
  o.temperature = 1.0;
  o.max_new_tokens = 40;
  o.seed = 7;
  std::vector<int64_t> streamed;
  auto a = generate(model, {1, 2, 3}, o, [&](int64_t t) { streamed.push_back(t); });
  EXPECT_EQ(a, streamed);
  EXPECT_EQ(generate(model, {1, 2, 3}, o), a);
  o.use_cache = false;  // same distribution each step, same draws
  EXPECT_EQ(generate(model, {1, 2, 3}, o), a);
  o.seed = 8;
  EXPECT_NE(generate(model, {1, 2, 3}, o), a);
}

TEST(Sample, DrawsFollowTheTemperedDistribution) {
  auto logits = torch::log(torch::tensor({0.5, 0.3, 0.15, 0.05}, torch::kFloat32));
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(123);
  for (double temp : {1.0, 0.5}) {
    SampleOptions o;
    o.temperature = temp;
    auto p = torch::softmax(logits.to(torch::kFloat64) / temp, 0);
    std::vector<double> count(4, 0);
    const int n = 20000;
    for (int i = 0; i < n; ++i) count[sample_token(logits, o, gen)] += 1;
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(count[k] / n, p[k].item<double>(), 0.015) << "temp " << temp << " id " << k;
  }
}

TEST(Sample, TopKAndVocabLimitRestrictTheChoices) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(5);
  auto logits = torch::tensor({1.0f, 4.0f, 3.0f, 0.5f, 3.5f, 9.0f, 8.0f});  // ids 5, 6: padding rows
  SampleOptions o;
  o.vocab_limit = 5;
  o.top_k = 3;
  o.temperature = 5.0;  // flat enough that every allowed id shows up
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(sample_token(logits, o, gen));
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 4}));
  o.temperature = 0;
  EXPECT_EQ(sample_token(logits, o, gen), 1);  // the argmax below the limit
  o.vocab_limit = 0;
  EXPECT_EQ(sample_token(logits, o, gen), 5);
}
