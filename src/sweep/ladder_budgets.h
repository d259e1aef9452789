// Sweeps, a ladder's data ratios: a token rule that lists several tokens-per-parameter
// ratios ({"per_param": [5, 10, 20]}) gives each rung several budgets, each its own
// point (an axis "ratio"), at the price of little more than the longest one.
//
// The schedule must be "wsd" (optim/schedule.h): its rate before the decay does not
// depend on the run's length, so the budgets of a rung share its warmup and its stable
// phase. The longest budget's point is an ordinary run that also saves (and keeps) a
// checkpoint at each shorter budget's decay start, max_steps - round(decay_fraction x
// max_steps) of that budget's steps (train.ckpt_steps); each shorter budget's point is a
// branch of it (sweep/branch.h) that starts from that checkpoint and trains only its own
// decay. A branch therefore ends exactly where its config trained from scratch would:
// its config.json is that run's (its steps, warmup, decay and rate), and
// tests/python/sweep/test_ladder_ratios.py compares the two bit for bit.
#pragma once

#include "config/run_config.h"
#include "sweep/ladder_rules.h"

#include <functional>
#include <string>
#include <vector>

namespace xsagpt {

// One data ratio of a rung whose token rule lists several.
struct LadderBudget {
  double ratio = 0;                    // tokens per parameter
  int64_t steps = 0;                   // its run's train.max_steps
  int64_t branch_step = 0;             // its decay's start: where it branches off the rung's longest run
  std::vector<std::string> overrides;  // what its points get besides the rung's: max_steps (ckpt_steps)
};

// Each budget of a rung from its steps (ascending, one per ratio of `tokens`), each
// checked by resolving the rung's config with its overrides (`resolve`). Refused naming
// the rung (`at`) and the ratios: a schedule other than wsd, two ratios that round to
// one length, a decay that leaves no stable step to branch from.
std::vector<LadderBudget> ladder_budgets(const LadderTokenRule& tokens, const std::vector<int64_t>& steps,
                                         int64_t step_tokens,
                                         const std::function<RunConfig(const std::vector<std::string>&)>& resolve,
                                         const std::string& at);

// The ladder's schedule rule's words for its branches.
std::string branch_rule(const TrainConfig& base);

}  // namespace xsagpt
