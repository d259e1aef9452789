// The Huber-loss power-law fit of stats/huber_fit.h on synthetic curves whose E, A and
// alpha are chosen: recovered closely without noise and within the noise's reach with
// it; E held at the lowest observed loss where the best curve would put it above; its
// end no worse than the chosen law on the same objective; and the refusals. The check
// against scipy.optimize.minimize on the same objective is
// tests/python/sweep/test_scaling_fit.py.
#include "chosen_law.h"
#include "stats/huber_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace xsagpt;
using test::chosen_law;
using test::ChosenLaw;
using ::testing::HasSubstr;

namespace {

// The law's samples at the six computes (test::sample_law) as the fit takes them.
std::vector<HuberPoint> sampled(const ChosenLaw& law, int seeds, double noise, uint64_t rng_seed) {
  std::vector<HuberPoint> out;
  for (const auto& [c, loss] : test::sample_law(law, test::kSixComputes, seeds, noise, rng_seed))
    out.push_back({c, loss});
  return out;
}

}  // namespace

TEST(HuberFit, RecoversChosenParametersWithoutNoise) {
  for (const auto& law : {chosen_law(1.8, 1.2, 0.28), chosen_law(2.4, 0.8, 0.15), chosen_law(1.2, 2.0, 0.5)}) {
    SCOPED_TRACE(law.alpha);
    const auto fit = fit_huber_power_law(sampled(law, 1, 0, 0));
    ASSERT_TRUE(fit.law) << fit.why;
    EXPECT_NEAR(fit.law->E, law.E, 1e-4 * law.E);
    EXPECT_NEAR(fit.law->alpha, law.alpha, 1e-4 * law.alpha);
    EXPECT_NEAR(fit.law->A, law.A, 1e-3 * law.A);
    EXPECT_FALSE(fit.e_capped);
    EXPECT_EQ(fit.starts, 12);
  }
}

TEST(HuberFit, RecoversChosenParametersWithinTheNoisesReachAndIsAMinimum) {
  const auto law = chosen_law(1.8, 1.2, 0.28);
  const auto pts = sampled(law, 3, 0.002, 11);
  const auto fit = fit_huber_power_law(pts);
  ASSERT_TRUE(fit.law) << fit.why;
  EXPECT_NEAR(fit.law->E, law.E, 0.1);
  EXPECT_NEAR(fit.law->alpha, law.alpha, 0.05);
  EXPECT_NEAR(fit.law->loss(1e18), law.at(1e18), 0.005);
  EXPECT_EQ(fit.points, 18u);
  // The noise moved it off the chosen law, and the chosen law is no better on the objective it minimises.
  EXPECT_GT(std::fabs(fit.law->alpha - law.alpha), 1e-5);
  EXPECT_LE(fit.objective, huber_objective(pts, PowerLaw{law.E, law.A, law.alpha}) * (1 + 1e-9));
  EXPECT_NEAR(fit.objective, huber_objective(pts, *fit.law), 1e-15);
}

// A curve that flattens at 2.0 over five rungs and one run below it (an outlier the Huber
// loss counts linearly): the best curve's floor would lie above that run, so E is held at it.
TEST(HuberFit, EIsHeldAtTheLowestObservedLoss) {
  const auto law = chosen_law(2.0, 0.6, 0.6);
  auto pts = sampled(law, 1, 0, 0);
  pts.push_back({1.6e18, 1.9});
  const auto fit = fit_huber_power_law(pts);
  ASSERT_TRUE(fit.law) << fit.why;
  EXPECT_TRUE(fit.e_capped);
  EXPECT_EQ(fit.e_cap, 1.9);
  EXPECT_DOUBLE_EQ(fit.law->E, 1.9);
  EXPECT_GT(fit.law->alpha, 0);
  EXPECT_EQ(fit.starts, 16);
}

TEST(HuberFit, TooFewPointsOrComputesGiveNoFitAndSayWhy) {
  const auto law = chosen_law(1.8, 1.2, 0.28);
  auto four = sampled(law, 1, 0, 0);
  four.resize(4);
  const auto few = fit_huber_power_law(four);
  EXPECT_FALSE(few.law);
  EXPECT_EQ(few.why, "5 points needed for the Huber fit, 4 here");
  std::vector<HuberPoint> two_computes{{1e17, 3.0}, {1e17, 3.1}, {1e18, 2.5}, {1e18, 2.6}, {1e18, 2.55}};
  EXPECT_THAT(fit_huber_power_law(two_computes).why, HasSubstr("3 distinct computes needed"));
  // Losses that rise with compute: no power law falls through them.
  std::vector<HuberPoint> rising;
  for (double c : test::kSixComputes) rising.push_back({c, 2.0 + 0.1 * std::log10(c / 1e17)});
  const auto up = fit_huber_power_law(rising);
  EXPECT_FALSE(up.law);
  EXPECT_THAT(up.why, HasSubstr("does not fall with compute"));
}
