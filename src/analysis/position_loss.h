// Validation loss by token position, for `xsagpt analyze --positions`: whether a
// model's advantage lies early in a sequence or late (the paper's claim that XSA's
// gain grows with sequence length is a claim about the late positions).
//
// Position p (1-based) is the prediction made after seeing p tokens: the target at
// index p-1 of a sequence. Positions are grouped in log2 buckets 1, 2-3, 4-7, ...,
// [2^k, 2^(k+1) - 1], the last one cut at the sequence length T. The per-token
// losses come from GPT::token_losses, the terms of the ordinary loss through the same
// LM-head path (fused kernel, chunks or whole logits) the model's runtime uses, so
// the token-weighted mean over all buckets is the ordinary validation loss
// (train/evaluate.h) of the same batches. Sums are kept in float64.
#pragma once

#include "data/loader.h"
#include "model/gpt.h"

#include <utility>
#include <vector>

namespace xsagpt {

struct PositionBucket {
  int64_t first = 0, last = 0;  // positions, 1-based, inclusive
  int64_t tokens = 0;           // targets counted (sequences x positions, ignored targets excepted)
  double mean_loss = 0;         // nats per token
};

struct PositionLoss {
  std::vector<PositionBucket> buckets;
  int64_t tokens = 0;    // all targets counted
  double mean_loss = 0;  // token-weighted mean over every position
};

// The buckets' [first, last] for sequences of T tokens: [1, 1], [2, 3], [4, 7], ...
std::vector<std::pair<int64_t, int64_t>> log2_position_buckets(int64_t T);

// Runs `model` (in its runtime, without gradients) over every batch of `val` on
// `device` and sums each position's losses.
PositionLoss loss_by_position(GPT& model, const ValidationSet& val, torch::Device device);

}  // namespace xsagpt
