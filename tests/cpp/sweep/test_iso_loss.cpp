// The iso-loss multiplier of sweep/iso_loss.h on curves whose crossings are known in
// closed form: the first crossing read linearly between evaluations, the ratio per
// seed, the geometric mean with its t interval on the log scale, and a seed that
// never reaches the target named instead of extrapolated. The check against numpy
// and scipy on real runs is tests/python/sweep/test_iso_loss.py.
#include "sweep/iso_loss.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;

TEST(IsoLoss, FirstReachIsTheFirstCrossingReadLinearly) {
  const std::vector<double> x{0, 100, 200, 300, 400};
  // Down through 2.0 between 100 and 200, up again, down again: the first crossing counts.
  const std::vector<double> loss{5.0, 3.0, 1.0, 2.5, 1.5};
  ASSERT_TRUE(first_reach(x, loss, 2.0));
  EXPECT_DOUBLE_EQ(*first_reach(x, loss, 2.0), 100 + 100 * (3.0 - 2.0) / (3.0 - 1.0));
  EXPECT_DOUBLE_EQ(*first_reach(x, loss, 1.0), 200);  // exactly on an evaluation
  EXPECT_DOUBLE_EQ(*first_reach(x, loss, 6.0), 0);    // the first evaluation already there
  EXPECT_FALSE(first_reach(x, loss, 0.99));           // never that low: no extrapolation
  EXPECT_FALSE(first_reach({}, {}, 1.0));
}

TEST(IsoLoss, RatiosPairedBySeedOnTheLogScaleAndASeedThatNeverGetsThere) {
  const std::vector<double> bx{0, 100, 200, 300};
  IsoLoss iso;
  // Seed 1: the baseline reaches its final 1.5 at 300; the variant between 100 and 200.
  iso.add(1, 1.5, bx, {5.0, 3.0, 2.0, 1.5}, bx, {5.0, 2.5, 1.0, 0.8});
  // Seed 2: the baseline's curve dipped to its final loss before its end (at 250).
  iso.add(2, 1.6, bx, {5.0, 3.0, 1.2, 1.6}, {0, 150, 300, 450}, {5.0, 3.5, 2.0, 1.4});
  // Seed 3: the variant stops short of the target.
  iso.add(3, 1.5, bx, {5.0, 3.0, 2.0, 1.5}, bx, {5.0, 4.0, 3.0, 2.0});
  const auto j = iso.to_json();

  const double v1 = 100 + 100 * (2.5 - 1.5) / (2.5 - 1.0), b1 = 300;
  const double b2 = 100 + 100 * (3.0 - 1.6) / (3.0 - 1.2), v2 = 300 + 150 * (2.0 - 1.6) / (2.0 - 1.4);
  const double l1 = std::log(v1 / b1), l2 = std::log(v2 / b2);
  ASSERT_NE(l1, l2);  // a spread, so an interval to check
  EXPECT_EQ(j["n"], 2);
  EXPECT_EQ(j["seeds"], nlohmann::json({1, 2}));
  EXPECT_DOUBLE_EQ(j["per_seed"][0]["variant_x"].get<double>(), v1);
  EXPECT_DOUBLE_EQ(j["per_seed"][1]["baseline_x"].get<double>(), b2);
  EXPECT_DOUBLE_EQ(j["per_seed"][1]["ratio"].get<double>(), v2 / b2);
  const double mean = (l1 + l2) / 2, sd = std::abs(l1 - l2) / std::sqrt(2.0);
  const double half = 12.706204736174694 * sd / std::sqrt(2.0);  // t_0.975 with 1 degree of freedom
  EXPECT_NEAR(j["multiplier"].get<double>(), std::sqrt((v1 / b1) * (v2 / b2)), 1e-12);
  EXPECT_NEAR(j["ci95"][0].get<double>(), std::exp(mean - half), 1e-9);
  EXPECT_NEAR(j["ci95"][1].get<double>(), std::exp(mean + half), 1e-9);
  EXPECT_NEAR(j["log_ratio"]["mean"].get<double>(), mean, 1e-15);
  ASSERT_EQ(j["not_reached"].size(), 1u);
  EXPECT_EQ(j["not_reached"][0]["seed"], 3);
  EXPECT_EQ(j["not_reached"][0]["variant_best"], 2.0);
  EXPECT_EQ(j["not_reached"][0]["variant_end"], 300.0);
  EXPECT_TRUE(j["skipped"].empty());
}

TEST(IsoLoss, OneSeedHasNoIntervalAndACurveAtTheTargetFromTheStartNoRatio) {
  IsoLoss iso;
  iso.add(7, 2.0, {0, 10}, {3.0, 2.0}, {0, 10}, {3.0, 1.0});
  iso.add(8, 4.0, {0, 10}, {3.0, 4.0}, {0, 10}, {3.0, 1.0});  // a baseline that never went below its start
  const auto j = iso.to_json();
  EXPECT_EQ(j["n"], 1);
  EXPECT_DOUBLE_EQ(j["multiplier"].get<double>(), 5.0 / 10.0);
  EXPECT_TRUE(j["ci95"].is_null() && j["p"].is_null());
  ASSERT_EQ(j["skipped"].size(), 1u);
  EXPECT_EQ(j["skipped"][0]["seed"], 8);
}

// The time axis gave a number for seeds the token axis refused: its first evaluation lies
// at the run's start-up time, not at 0, so "at the target at x = 0" never held there and
// the ratio was one of two start-up times. Both axes now decide on the losses alone.
TEST(IsoLoss, TokensAndTimeRefuseTheSameSeedsWhateverTheFirstEvaluationsX) {
  const std::vector<double> tokens{0, 100, 200}, base_time{4.0, 5.0, 6.0}, time{7.0, 8.5, 10.0};
  IsoLoss by_tokens, by_time;
  auto add = [&](int64_t seed, double target, const std::vector<double>& base, const std::vector<double>& loss) {
    by_tokens.add(seed, target, tokens, base, tokens, loss);
    by_time.add(seed, target, base_time, base, time, loss);
  };
  add(1, 5.5, {5.0, 4.0, 5.5}, {5.2, 4.5, 4.0});  // the baseline ends above its start (too high an lr)
  add(2, 5.0, {5.0, 5.0, 5.0}, {5.4, 4.5, 4.0});  // a flat baseline
  add(3, 4.0, {5.0, 4.5, 4.0}, {3.9, 3.5, 3.0});  // the variant at the target from its first evaluation
  add(4, 4.0, {5.0, 4.5, 4.0}, {5.0, 4.0, 3.5});  // an ordinary seed: a ratio on both axes
  const auto t = by_tokens.to_json(), s = by_time.to_json();
  for (const auto& j : {t, s}) {
    EXPECT_EQ(j["n"], 1);
    EXPECT_EQ(j["seeds"], nlohmann::json({4}));
    ASSERT_EQ(j["skipped"].size(), 3u);
    EXPECT_EQ(j["skipped"][0]["seed"], 1);
    EXPECT_EQ(j["skipped"][1]["seed"], 2);
    EXPECT_EQ(j["skipped"][2]["seed"], 3);
    EXPECT_THAT(j["skipped"][0]["why"].get<std::string>(), ::testing::HasSubstr("baseline"));
    EXPECT_THAT(j["skipped"][2]["why"].get<std::string>(), ::testing::HasSubstr("variant"));
  }
  EXPECT_EQ(t["skipped"], s["skipped"]);  // one rule: the same seeds for the same reasons
  EXPECT_DOUBLE_EQ(t["per_seed"][0]["ratio"].get<double>(), 100.0 / 200.0);
  EXPECT_DOUBLE_EQ(s["per_seed"][0]["ratio"].get<double>(), 8.5 / 6.0);
}
