// The ladder's settings as its points get them (see ladder_points.h).
#include "sweep/ladder_points.h"

namespace xsagpt {

std::vector<LadderStep> ladder_steps(const std::optional<SweepLadder>& ladder) {
  if (!ladder) return {LadderStep{}};
  std::vector<LadderStep> out;
  const auto& l = *ladder;
  const std::vector<double> mults = l.lr_multipliers.empty() ? std::vector<double>{1.0} : l.lr_multipliers;
  for (size_t i = 0; i < l.rungs.size(); ++i) {
    const auto& rung = l.rungs[i];
    const int budgets = static_cast<int>(rung.budgets.size());
    for (int b = budgets - 1; b >= (budgets ? 0 : -1); --b)
      for (double m : mults) {
        LadderStep step{static_cast<int>(i), b, m, rung.overrides, {{"rung", rung.name}}, "rung=" + rung.name};
        if (b >= 0) {
          const auto& budget = rung.budgets[static_cast<size_t>(b)];
          step.overrides.insert(step.overrides.end(), budget.overrides.begin(), budget.overrides.end());
          step.values["ratio"] = budget.ratio;
          step.name += ",ratio=" + json(budget.ratio).dump();  // a number: as value_text (sweep/grid.h) writes it
        }
        step.overrides.push_back(lr_override(rung.lr * m));
        if (!l.lr_multipliers.empty()) {
          step.values["lr_mult"] = m;
          step.name += ",lr_mult=" + json(m).dump();
        }
        out.push_back(std::move(step));
      }
  }
  return out;
}

}  // namespace xsagpt
