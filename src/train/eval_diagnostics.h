// What training logs at each evaluation beside the val loss: the attention
// similarity bias of every layer and, for a gated model, where its XSA gates stand.
// The bias is the mean of cos(y_i, v_i) between a token's attention output and its
// own value (the paper's figure 1), computed by analysis/attention_stats.h, the code
// `xsagpt analyze` uses, so the curve over training ends at the number analyze gives
// for the last checkpoint on the same sequences. It is measured on the first
// train.eval_similarity_sequences sequences of each rank's first validation batch,
// cut to their first train.eval_similarity_positions tokens (causal attention: those
// positions see exactly what they see in the full sequence), averaged over ranks.
// The explicit T x T attention weights in float64 are the cost; the cut keeps it
// small next to the val loss at any sequence length (docs/sweeps-and-plots.md).
#pragma once

#include "config/run_config.h"
#include "data/loader.h"
#include "distributed/context.h"
#include "model/gpt.h"

#include <nlohmann/json.hpp>

namespace xsagpt {

// The fields of the val line: "cos_y_v" (a number per layer) when the bias is
// measured (sequences > 0), and "xsa_gate" when some layer is gated: per layer null
// (no gate) or {"mean", "min", "max"} of g = tanh(alpha) over its heads, with "heads"
// (every head's g) for up to kGateHeadsListed heads. Every rank calls it.
inline constexpr int64_t kGateHeadsListed = 16;
nlohmann::json eval_diagnostics(GPT& model, const ValidationSet& val, const TrainConfig& t, torch::Device device,
                                DistContext& dist);

}  // namespace xsagpt
