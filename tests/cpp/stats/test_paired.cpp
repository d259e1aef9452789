// Student's t of stats/paired.h by its properties (the check against scipy.stats is
// tests/python/sweep/test_paired_stats.py).
#include "stats/paired.h"
#include "util/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

using namespace xsagpt;

// df 1 is the Cauchy distribution and df 2 has A(t) = t / sqrt(2 + t^2): both in closed form.
TEST(PairedT, LowDegreesOfFreedomHaveTheirClosedForms) {
  for (double t : {0.0, 0.3, 1.0, 2.5, 12.7, 100.0}) {
    EXPECT_NEAR(t_central_probability(t, 1), 2 / std::numbers::pi * std::atan(t), 1e-15) << t;
    EXPECT_NEAR(t_central_probability(t, 2), t / std::sqrt(2 + t * t), 1e-15) << t;
  }
}

TEST(PairedT, CdfIsMonotoneSymmetricAndTendsToTheNormal) {
  for (int64_t df : {1, 2, 3, 7, 30}) {
    double last = 0;
    for (double t = 0; t < 20; t += 0.25) {
      const double a = t_central_probability(t, df);
      EXPECT_GE(a, last - 1e-15);  // the closed form's sums round in the last bit near 1
      EXPECT_LE(a, 1.0);
      EXPECT_DOUBLE_EQ(a, t_central_probability(-t, df));
      last = a;
    }
    EXPECT_DOUBLE_EQ(t_central_probability(t_critical(0.95, df), df), 0.95);
  }
  // A large df is nearly normal: P(|Z| <= 1.959964) = 0.95.
  EXPECT_NEAR(t_critical(0.95, 100000), 1.959964, 1e-4);
  EXPECT_NEAR(t_critical(0.95, 1), std::tan(0.95 * std::numbers::pi / 2), 1e-9);  // Cauchy's quantile
}

TEST(PairedT, OneDifferenceHasNoIntervalAndEqualOnesNoTest) {
  const auto one = paired_stats({0.5});
  EXPECT_EQ(one.n, 1);
  EXPECT_DOUBLE_EQ(one.mean, 0.5);
  EXPECT_FALSE(one.sd || one.ci_low || one.p);
  const auto same = paired_stats({0.25, 0.25, 0.25});
  ASSERT_TRUE(same.ci_low && same.sd);
  EXPECT_EQ(*same.sd, 0.0);
  EXPECT_EQ(*same.ci_low, 0.25);
  EXPECT_FALSE(same.p);
  EXPECT_THROW(t_central_probability(1.0, 0), ConfigError);
}
