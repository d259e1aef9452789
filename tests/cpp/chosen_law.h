// A power law L(C) = E + A C^-alpha whose parameters a test chooses, written at the
// ladders' scale (the excess loss at 1e18 FLOPs), for the tests of stats/scaling_fit.h
// and sweep/ladder_analysis.h, and the one sampler of it that the fits' tests share.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace xsagpt::test {

struct ChosenLaw {
  double E, A, alpha;
  double at(double c) const { return E + A * std::pow(c, -alpha); }
};

// E plus `excess` at 1e18 FLOPs, falling as C^-alpha.
inline ChosenLaw chosen_law(double E, double excess, double alpha) {
  return {E, excess * std::pow(1e18, alpha), alpha};
}

// Six computes, a factor of 4 apart, from 1e17 to about 1e20 FLOPs: a ladder's span.
inline const std::vector<double> kSixComputes{1e17, 4e17, 1.6e18, 6.4e18, 2.56e19, 1.024e20};

// (compute, loss) at every compute `seeds` times, in order: the law's loss plus normal
// noise of sd `noise` (none at 0) from a generator seeded with `rng_seed`.
inline std::vector<std::pair<double, double>> sample_law(const ChosenLaw& law, const std::vector<double>& computes,
                                                         int seeds, double noise, uint64_t rng_seed) {
  std::mt19937_64 rng(rng_seed);
  std::normal_distribution<double> eps(0.0, noise);
  std::vector<std::pair<double, double>> out;
  for (double c : computes)
    for (int s = 0; s < seeds; ++s) out.emplace_back(c, law.at(c) + (noise > 0 ? eps(rng) : 0.0));
  return out;
}

}  // namespace xsagpt::test
