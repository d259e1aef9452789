// The power-law fit of stats/scaling_fit.h on synthetic curves whose E, A and alpha are
// chosen: recovered to rounding without noise and within the noise's reach with it, for
// E fitted, E = 0 and one E shared by several curves; E kept >= 0; and the refusals. The
// check against scipy.optimize.curve_fit on the same points is
// tests/python/sweep/test_scaling_fit.py.
#include "chosen_law.h"
#include "stats/scaling_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace xsagpt;
using test::chosen_law;
using test::ChosenLaw;
using test::kSixComputes;
using ::testing::HasSubstr;

namespace {

// A curve of the law's samples (test::sample_law).
CurvePoints sampled_curve(const ChosenLaw& law, const std::vector<double>& computes, int seeds, double noise,
                          uint64_t rng_seed) {
  CurvePoints c;
  for (const auto& [x, y] : test::sample_law(law, computes, seeds, noise, rng_seed)) c.add(x, y);
  return c;
}

}  // namespace

TEST(ScalingFit, RecoversChosenParametersToRoundingWithoutNoise) {
  const auto law = chosen_law(1.8, 1.2, 0.28);
  const auto fit = fit_power_law(sampled_curve(law, kSixComputes, 1, 0, 0), std::nullopt);
  ASSERT_TRUE(fit.law) << fit.why;
  EXPECT_NEAR(fit.law->E, law.E, 1e-6 * law.E);
  EXPECT_NEAR(fit.law->alpha, law.alpha, 1e-6 * law.alpha);
  EXPECT_NEAR(fit.law->A, law.A, 1e-5 * law.A);
  EXPECT_LT(fit.rmse(), 1e-9);
  // The same with two of every point: the count is a weight, the fit unchanged.
  const auto twice = fit_power_law(sampled_curve(law, kSixComputes, 2, 0, 0), std::nullopt);
  ASSERT_TRUE(twice.law);
  EXPECT_EQ(twice.points, 12);
  EXPECT_NEAR(twice.law->alpha, law.alpha, 1e-6 * law.alpha);
}

TEST(ScalingFit, RecoversChosenParametersWithinTheNoise) {
  // 8 seeds at 6 computes, noise sd 0.003 on losses from 3.0 down to 2.1: the curve's
  // parameters within a few standard errors, the fitted loss everywhere within the noise.
  const auto law = chosen_law(1.8, 1.2, 0.28);
  const auto c = sampled_curve(law, kSixComputes, 8, 0.003, 11);
  const auto fit = fit_power_law(c, std::nullopt);
  ASSERT_TRUE(fit.law) << fit.why;
  EXPECT_NEAR(fit.law->E, law.E, 0.05);
  EXPECT_NEAR(fit.law->alpha, law.alpha, 0.03);
  for (double x : kSixComputes) EXPECT_NEAR(fit.law->loss(x), law.at(x), 0.003);
  EXPECT_NEAR(fit.rmse(), 0.003, 0.001);  // what is left is the noise
  EXPECT_NE(fit.law->E, law.E);           // the noise did move it: this is not the noiseless case again
}

TEST(ScalingFit, EZeroAndASharedE) {
  const auto pure = chosen_law(0, 2.5, 0.06);
  const auto zero = fit_power_law(sampled_curve(pure, {1e17, 1e19}, 3, 0, 0), 0.0);
  ASSERT_TRUE(zero.law) << zero.why;
  EXPECT_EQ(zero.law->E, 0);
  EXPECT_NEAR(zero.law->alpha, pure.alpha, 1e-6 * pure.alpha);
  EXPECT_NEAR(zero.law->A, pure.A, 1e-5 * pure.A);

  // Three curves sharing E = 1.7, three computes each: one E, three A and alpha.
  const std::vector<ChosenLaw> laws{chosen_law(1.7, 1.0, 0.3), chosen_law(1.7, 0.9, 0.35), chosen_law(1.7, 1.1, 0.25)};
  std::vector<CurvePoints> curves;
  for (const auto& l : laws) curves.push_back(sampled_curve(l, {1e17, 1e18, 1e19}, 2, 0, 0));
  const auto fits = fit_shared_e(curves);
  ASSERT_EQ(fits.size(), 3u);
  for (size_t i = 0; i < fits.size(); ++i) {
    ASSERT_TRUE(fits[i].law) << fits[i].why;
    EXPECT_NEAR(fits[i].law->E, 1.7, 1e-6);
    EXPECT_NEAR(fits[i].law->alpha, laws[i].alpha, 1e-5 * laws[i].alpha);
    EXPECT_NEAR(fits[i].law->A, laws[i].A, 1e-4 * laws[i].A);
  }
}

TEST(ScalingFit, EStaysAtZeroWhereLeastSquaresWouldTakeItBelow) {
  // An exact power law with E = -0.5: unconstrained least squares would return it; a
  // cross-entropy curve cannot level off below 0, so the fit has E = 0 and a residual.
  const auto below = chosen_law(-0.5, 3.0, 0.2);
  const auto c = sampled_curve(below, kSixComputes, 1, 0, 0);
  const auto fit = fit_power_law(c, std::nullopt);
  ASSERT_TRUE(fit.law) << fit.why;
  EXPECT_EQ(fit.law->E, 0);
  EXPECT_GT(fit.rmse(), 1e-6);
  // ... and it is the best curve with E = 0.
  const auto at_zero = fit_power_law(c, 0.0);
  ASSERT_TRUE(at_zero.law);
  EXPECT_NEAR(fit.law->alpha, at_zero.law->alpha, 1e-8);
  EXPECT_NEAR(fit.sse, at_zero.sse, 1e-12);
}

TEST(ScalingFit, RefusesCurvesThatDoNotFallAndTooFewComputes) {
  CurvePoints rising;
  for (double x : kSixComputes) rising.add(x, 2.0 + 0.05 * std::log(x / 1e17));
  const auto up = fit_power_law(rising, std::nullopt);
  EXPECT_FALSE(up.law);
  EXPECT_THAT(up.why, testing::AnyOf(HasSubstr("does not fall"), HasSubstr("no power law falling")));
  EXPECT_FALSE(fit_power_law(rising, 0.0).law);

  const auto two = sampled_curve(chosen_law(1.8, 1.2, 0.28), {1e17, 1e18}, 4, 0, 0);
  const auto free = fit_power_law(two, std::nullopt);
  EXPECT_FALSE(free.law);
  EXPECT_THAT(free.why, HasSubstr("3 distinct computes needed to fit E, A and alpha, 2 here"));
  EXPECT_TRUE(fit_power_law(two, 0.0).law);  // two computes fix A and alpha

  std::vector<CurvePoints> one_compute{two, sampled_curve(chosen_law(1.8, 1.0, 0.3), {1e18}, 4, 0, 0)};
  const auto shared = fit_shared_e(one_compute);
  EXPECT_FALSE(shared[0].law || shared[1].law);
  EXPECT_THAT(shared[1].why, HasSubstr("2 distinct computes on every curve"));
}

TEST(ScalingFit, ComputeAtInvertsTheCurve) {
  const PowerLaw law{1.5, 4e5, 0.3};
  for (double c : {1e15, 1e18, 1e22}) EXPECT_NEAR(*law.compute_at(law.loss(c)) / c, 1.0, 1e-12);
  EXPECT_FALSE(law.compute_at(1.5));  // E itself: never reached
  EXPECT_FALSE(law.compute_at(1.2));
}
