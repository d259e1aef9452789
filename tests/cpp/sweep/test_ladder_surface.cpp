// The fit across a ladder's data ratios (sweep/ladder_surface.h) on points of a chosen
// surface (Chinchilla's, Hoffmann et al. 2022) at two ratios, 5 and 10 tokens per
// parameter: the compute-optimal ratio it reports is the closed form's, and a budget whose
// optimum lies outside the ratios trained gets no multiplier, saying why, while one
// inside gets it.
#include "sweep/ladder_surface.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

struct ChosenSurface {
  double E, A, alpha, B, beta;
  double loss(double n, double d) const { return E + A * std::pow(n, -alpha) + B * std::pow(d, -beta); }
  // dL/dN = 0 along 6 N D = C: N = G (C/6)^(beta/(alpha+beta)), G = (alpha A / (beta B))^(1/(alpha+beta)).
  double optimal_ratio(double c) const {
    const double g = std::pow(alpha * A / (beta * B), 1 / (alpha + beta));
    const double n = g * std::pow(c / 6, beta / (alpha + beta));
    return c / 6 / n / n;
  }
};

}  // namespace

TEST(LadderSurface, NoMultiplierWhereTheOptimumLiesOutsideTheRatiosTrained) {
  const ChosenSurface sa{1.69, 406.4, 0.34, 410.7, 0.28};
  ChosenSurface xsa = sa;
  xsa.E -= 0.01;
  std::vector<SurfaceObservation> obs;
  for (const auto& [name, s] : {std::pair{"sa", sa}, std::pair{"xsa", xsa}})
    for (double n : {1e6, 2e6, 4e6, 8e6, 1.6e7})
      for (double ratio : {5.0, 10.0}) obs.push_back({name, n, ratio * n, s.loss(n, ratio * n)});
  const double inside = 1e12, past = 1e16;
  // Non-trivial: one budget's optimum lies between the ratios, the other's beyond them.
  ASSERT_GT(sa.optimal_ratio(inside), 5.5);
  ASSERT_LT(sa.optimal_ratio(inside), 9.5);
  ASSERT_GT(sa.optimal_ratio(past), 12);
  const auto out = ladder_surface(obs, "sa", {"xsa"}, {{"in", inside}, {"past", past}}, 10);
  ASSERT_EQ(out["budgets"].size(), 2u);
  const auto& in_row = out["budgets"][0];
  const auto& past_row = out["budgets"][1];
  EXPECT_NEAR(in_row["baseline"]["ratio"].get<double>(), sa.optimal_ratio(inside), 0.02 * sa.optimal_ratio(inside));
  EXPECT_NEAR(past_row["baseline"]["ratio"].get<double>(), sa.optimal_ratio(past), 0.02 * sa.optimal_ratio(past));
  const auto& in_cell = in_row["variants"]["xsa"];
  ASSERT_TRUE(in_cell["multiplier"].is_number()) << in_cell.dump();
  EXPECT_GT(in_cell["multiplier"].get<double>(), 0);
  EXPECT_LT(in_cell["multiplier"].get<double>(), 1);  // a lower E: it needs less
  const auto& past_cell = past_row["variants"]["xsa"];
  EXPECT_TRUE(past_cell["multiplier"].is_null()) << past_cell.dump();
  EXPECT_THAT(past_cell["why"].get<std::string>(), HasSubstr("lies outside the ratios trained (5-10)"));
}
