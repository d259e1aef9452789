// Autoregressive generation from a GPT: temperature and top-k sampling from a
// seeded generator, and a key/value cache so each new token costs one position.
//
// Context. The model sees at most block_size tokens. When the text outgrows that,
// the window jumps forward to the newest block_size/2 tokens (the cache is
// rebuilt from them once, then grows again), so the cost per token stays one
// position on average. Without the cache the same windows are used, so both ways
// compute the same distribution at every step.
#pragma once

#include "model/gpt.h"

#include <ATen/core/Generator.h>

#include <functional>
#include <vector>

namespace xsagpt {

// The most tokens one `sample` may generate. Past the context window generation
// slides it (generate() below), so block_size is no bound; this one keeps a typo
// such as 1e12 from running for days.
inline constexpr int64_t kMaxNewTokens = int64_t{1} << 20;

struct SampleOptions {
  int64_t max_new_tokens = 100;  // at most kMaxNewTokens (the commands check it)
  double temperature = 1.0;      // 0: greedy (argmax)
  int64_t top_k = 0;             // keep only the k most likely tokens; 0: all
  uint64_t seed = 1337;
  bool use_cache = true;
  int64_t vocab_limit = 0;  // > 0: ids >= this are never produced (GPT-2's 50257 in a vocab padded to 50304)
};

// The next token from one row of logits (vocab_size,), on any device. Draws one
// uniform number from `gen` (a CPU generator) unless temperature is 0.
int64_t sample_token(const torch::Tensor& logits, const SampleOptions& opts, at::Generator& gen);

// Continues `prompt` (at least one token) with up to max_new_tokens tokens, calling
// on_token for each as soon as it is chosen; returns the new tokens. `stop`, when
// given, is asked after each token (after on_token) and ends generation early by
// returning true (stop strings, eval/generate_until.h). Puts the model in eval mode.
std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const SampleOptions& opts,
                              const std::function<void(int64_t)>& on_token = {},
                              const std::function<bool()>& stop = {});

}  // namespace xsagpt
