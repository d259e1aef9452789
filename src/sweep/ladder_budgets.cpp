// A rung's data ratios, their lengths and branch points (see ladder_budgets.h).
#include "sweep/ladder_budgets.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace xsagpt {

std::vector<LadderBudget> ladder_budgets(const LadderTokenRule& tokens, const std::vector<int64_t>& steps,
                                         int64_t step_tokens,
                                         const std::function<RunConfig(const std::vector<std::string>&)>& resolve,
                                         const std::string& at) {
  std::vector<LadderBudget> out;
  for (size_t b = 0; b < steps.size(); ++b) {
    LadderBudget budget{tokens.per_param[b], steps[b], 0, {fmt::format("train.max_steps={}", steps[b])}};
    if (b > 0 && steps[b] == steps[b - 1])
      throw ConfigError(
          fmt::format("{}: ratios {:g} and {:g} both give {} steps of {} tokens; list ratios that "
                      "differ by a step at every rung",
                      at, tokens.per_param[b - 1], tokens.per_param[b], steps[b], step_tokens));
    TrainConfig t;
    try {
      t = resolve(budget.overrides).train;
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{} at ratio {:g}: {}", at, budget.ratio, e.what()));
    }
    if (t.schedule != Schedule::kWsd)
      throw ConfigError(fmt::format(
          "{}: ladder.tokens.per_param lists {} ratios, which branch one run's stable phase into a decay each: "
          "that needs train.schedule \"wsd\" (the base's or \"set\"'s), not \"{}\"",
          at, steps.size(), name(t.schedule)));
    budget.branch_step = t.decay_start();
    if (budget.branch_step < 1)
      throw ConfigError(
          fmt::format("{} at ratio {:g}: train.decay_fraction {} decays all of its {} steps, leaving "
                      "no stable step to branch from; choose a decay_fraction below 1",
                      at, budget.ratio, t.decay_fraction, steps[b]));
    out.push_back(std::move(budget));
  }
  std::vector<int64_t> branch_steps;
  for (size_t b = 0; b + 1 < out.size(); ++b) branch_steps.push_back(out[b].branch_step);
  out.back().overrides.push_back(fmt::format("train.ckpt_steps={}", json(branch_steps).dump()));
  return out;
}

std::string branch_rule(const TrainConfig& base) {
  return fmt::format(
      "; several data ratios: one wsd run per rung at its longest budget, each shorter budget a branch of it "
      "from the checkpoint at its own decay's start (decay over the last {:g} of each budget's steps)",
      base.decay_fraction);
}

}  // namespace xsagpt
