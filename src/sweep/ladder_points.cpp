// The ladder's settings as its points get them (see ladder_points.h).
#include "sweep/ladder_points.h"

namespace xsagpt {

std::vector<LadderStep> ladder_steps(const std::optional<SweepLadder>& ladder) {
  if (!ladder) return {LadderStep{}};
  std::vector<LadderStep> out;
  const auto& l = *ladder;
  const std::vector<double> mults = l.lr_multipliers.empty() ? std::vector<double>{1.0} : l.lr_multipliers;
  for (size_t i = 0; i < l.rungs.size(); ++i)
    for (double m : mults) {
      LadderStep step{
          static_cast<int>(i), m, l.rungs[i].overrides, {{"rung", l.rungs[i].name}}, "rung=" + l.rungs[i].name};
      step.overrides.push_back(lr_override(l.rungs[i].lr * m));
      if (!l.lr_multipliers.empty()) {
        step.values["lr_mult"] = m;
        step.name += ",lr_mult=" + json(m).dump();  // a number: as value_text (sweep/grid.h) writes it
      }
      out.push_back(std::move(step));
    }
  return out;
}

}  // namespace xsagpt
