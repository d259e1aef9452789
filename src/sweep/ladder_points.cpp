// The ladder's settings as its points get them (see ladder_points.h).
#include "sweep/ladder_points.h"

namespace xsagpt {

LadderStep ladder_step(const SweepLadder& l, size_t i, double m, const std::string& variant,
                       const std::string& m_text) {
  LadderStep step{static_cast<int>(i),      m, variant, l.rungs[i].overrides, {{"rung", l.rungs[i].name}},
                  "rung=" + l.rungs[i].name};
  step.overrides.push_back(lr_override(l.rungs[i].lr * m));
  if (!l.lr_multipliers.empty()) {
    step.values["lr_mult"] = m;
    // a number: as value_text (sweep/grid.h) writes it
    step.name += ",lr_mult=" + (m_text.empty() ? json(m).dump() : m_text);
  }
  return step;
}

std::vector<LadderStep> rung_steps(const SweepLadder& l, size_t i, double m, const std::string& variant,
                                   const std::string& m_text) {
  const int budgets = static_cast<int>(l.rungs[i].budgets.size());
  std::vector<LadderStep> out;
  for (int b = budgets - 1; b >= (budgets ? 0 : -1); --b) {
    auto step = ladder_step(l, i, m, variant, m_text);
    if (b >= 0) {  // the budget's overrides before the rate, its ratio before the multiplier
      const auto& budget = l.rungs[i].budgets[static_cast<size_t>(b)];
      step.budget = b;
      step.overrides.insert(step.overrides.end() - 1, budget.overrides.begin(), budget.overrides.end());
      step.values["ratio"] = budget.ratio;
      const auto rung = "rung=" + l.rungs[i].name;
      step.name.insert(rung.size(), ",ratio=" + json(budget.ratio).dump());  // as value_text writes a number
    }
    out.push_back(std::move(step));
  }
  return out;
}

std::vector<LadderStep> ladder_steps(const std::optional<SweepLadder>& ladder) {
  if (!ladder) return {LadderStep{}};
  std::vector<LadderStep> out;
  const auto& l = *ladder;
  const std::vector<double> mults = l.lr_multipliers.empty() ? std::vector<double>{1.0} : l.lr_multipliers;
  // Within a rung the longest ratio first, at every multiplier: the runs the branches start from come first.
  for (size_t i = 0; i < l.rungs.size() && tunes_at(l, i); ++i) {
    std::vector<std::vector<LadderStep>> by_mult;
    for (double m : mults) by_mult.push_back(rung_steps(l, i, m));
    for (size_t b = 0; b < by_mult.front().size(); ++b)
      for (auto& steps : by_mult) out.push_back(std::move(steps[b]));
  }
  return out;
}

}  // namespace xsagpt
