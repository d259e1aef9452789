// Text generation for lm-evaluation-harness's generate_until requests: continue a
// prompt until one of the stop strings appears or max_new_tokens are made, and
// return the text before the first stop string (the harness cuts there too).
// The prompt is cut on the left to leave room for the new tokens, as the harness
// does; the tokens come from sample/generate.h (key/value cache, greedy at
// temperature 0, seeded sampling otherwise; never the padding ids beyond GPT-2's).
#pragma once

#include "model/gpt.h"
#include "tokenizer/gpt2_bpe.h"

#include <string>
#include <vector>

namespace xsagpt::eval {

struct GenerateRequest {
  std::string prompt;
  std::vector<std::string> until;  // stop strings; empty ones are ignored
  int64_t max_new_tokens = 0;      // 1..block_size (score checks it); 0: not given, min(256, block_size)
  double temperature = 0;          // 0: greedy
  uint64_t seed = 1337;
};

struct Generation {
  std::string text;      // the new text, cut before the first stop string
  int64_t n_tokens = 0;  // tokens generated (including those of a stop string)
};

Generation generate_until(GPT& model, const Gpt2Tokenizer& tok, const GenerateRequest& req);

}  // namespace xsagpt::eval
