// The log-likelihood engine behind `xsagpt score` and `xsagpt eval`: sums
// log p(continuation | context) over token requests (eval/request_split.h) with
// batched, gradient-free forward passes of a trained GPT.
//
// Each request is fed as lm-evaluation-harness feeds it: the model's input is the
// last block_size tokens of context+continuation without its final token, cut on
// the left when longer (the window), and the continuation's log-probabilities are
// read from the last len(continuation) positions. Requests are sorted by length
// and packed into right-padded batches of at most batch_tokens tokens (padding
// only follows a row's real tokens, which causal attention never lets it see);
// results come back in the requests' order.
//
// Precision: the model's runtime (bf16 or float32, set by the command from
// --precision); the selected logits go to float32 before the softmax and sums are
// accumulated in float64.
#pragma once

#include "eval/request_split.h"
#include "model/gpt.h"

#include <functional>
#include <stdexcept>

namespace xsagpt::eval {

struct ScoreOptions {
  int64_t batch_tokens = 0;  // tokens (rows x padded length) per forward pass; 0: default_batch_tokens
};

// A batch size that keeps the float32 logits of one pass near 1 GiB on the CPU
// (4096 tokens of a 50K vocabulary) and at 16384 tokens on a GPU, where it
// matches a training micro-batch of the paper's models.
int64_t default_batch_tokens(torch::Device device);

struct Score {
  double logprob = 0;     // sum of the continuation tokens' log-probabilities (natural log)
  bool is_greedy = true;  // every continuation token is the argmax of its position's logits
  int64_t n_tokens = 0;   // continuation tokens scored
};

// A request the model cannot score: the message says which (by index) and why.
struct RequestError : std::invalid_argument {
  RequestError(size_t index, const std::string& what) : std::invalid_argument(what), index(index) {}
  size_t index;
};

// Scores every request; on_batch(done, total) is called after each forward pass.
// Throws RequestError for a continuation longer than block_size or a request
// without context tokens before its continuation.
std::vector<Score> score_requests(GPT& model, const std::vector<TokenRequest>& requests, const ScoreOptions& opts,
                                  const std::function<void(size_t, size_t)>& on_batch = {});

}  // namespace xsagpt::eval
