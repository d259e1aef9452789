// A power law L(C) = E + A C^-alpha whose parameters a test chooses, written at the
// ladders' scale (the excess loss at 1e18 FLOPs), for the tests of stats/scaling_fit.h
// and sweep/ladder_analysis.h.
#pragma once

#include <cmath>

namespace xsagpt::test {

struct ChosenLaw {
  double E, A, alpha;
  double at(double c) const { return E + A * std::pow(c, -alpha); }
};

// E plus `excess` at 1e18 FLOPs, falling as C^-alpha.
inline ChosenLaw chosen_law(double E, double excess, double alpha) {
  return {E, excess * std::pow(1e18, alpha), alpha};
}

}  // namespace xsagpt::test
