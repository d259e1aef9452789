// Sweeps, the ladder's points: each setting of the ladder's axes (a rung, a data ratio
// when a rung has several, and a rate multiplier when they are swept) as what its points
// get before the variant and the grid: the rung's overrides with its budget and rate,
// its values ("rung", "ratio", "lr_mult") and the part of the points' names it gives.
// load_sweep (sweep/grid.h) crosses them with the variants and the grid.
#pragma once

#include "sweep/ladder.h"

#include <optional>
#include <string>
#include <vector>

namespace xsagpt {

struct LadderStep {
  int rung = -1;  // -1: a sweep without a ladder
  double lr_mult = 1;
  std::string variant;  // "": every variant's; else this variant's alone (a rate tuned for it)
  std::vector<std::string> overrides;
  json values = json::object();
  std::string name;  // "rung=<rung>[,ratio=<r>][,lr_mult=<m>]"; "" without a ladder
  int budget = -1;   // the data ratio: an index into the rung's budgets; -1 with one
};

// The ladder's settings, rung outermost, then each data ratio, longest first (the run
// the others branch off comes before them), then each multiplier of its rate; a sweep
// without a ladder has one, empty. With tune_rungs, the tuning rungs' alone: the rungs
// above run each variant at its own tuned multiplier (sweep/ladder_tuning.h).
std::vector<LadderStep> ladder_steps(const std::optional<SweepLadder>& ladder);

// Rung i at multiplier m, for one variant (or every one, ""); `m_text` names the
// multiplier in the point's name (as value_text writes the number, unless given).
LadderStep ladder_step(const SweepLadder& l, size_t i, double m, const std::string& variant = "",
                       const std::string& m_text = "");

// Rung i at multiplier m at each of its data ratios, longest first (the run the others
// branch off before them); ladder_step's one setting where the rung has one ratio.
std::vector<LadderStep> rung_steps(const SweepLadder& l, size_t i, double m, const std::string& variant = "",
                                   const std::string& m_text = "");

}  // namespace xsagpt
