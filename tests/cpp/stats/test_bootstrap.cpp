// The bootstrap of stats/bootstrap.h by its properties: the draws are the engine's
// outputs reduced to an index, every index equally likely; a replicate's weights are a
// resample of n items (they sum to n, each item drawn about once); the bootstrap standard
// error of a mean is the sample's spread over sqrt(n) (sqrt((n - 1) / n) of it, as
// resampling n items has it); the interval's reach is Student's t from a table times
// sqrt(n / (n - 1)), on the figure's scale or the log scale.
#include "stats/bootstrap.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

using namespace xsagpt;

TEST(Bootstrap, ADrawIsTheEnginesOutputReducedToAnIndex) {
  // Below 2^64 - (2^64 mod n) an output is never rejected (for these n a rejection has
  // probability under 1e-18), so the draws are x % n of the engine's own sequence.
  std::mt19937_64 rng(7), engine(7);
  for (size_t n : {1, 2, 3, 10, 1000003}) {
    for (int i = 0; i < 100; ++i) EXPECT_EQ(draw_index(rng, n), engine() % n) << n;
  }
}

TEST(Bootstrap, EveryIndexIsAboutEquallyLikely) {
  std::mt19937_64 rng(11);
  constexpr size_t kN = 6;
  constexpr int kDraws = 60000;
  std::vector<int> count(kN, 0);
  for (int i = 0; i < kDraws; ++i) {
    const size_t k = draw_index(rng, kN);
    ASSERT_LT(k, kN);
    ++count[k];
  }
  // Each count is binomial(60000, 1/6): mean 10000, sd 91; five sd either side.
  for (size_t k = 0; k < kN; ++k) EXPECT_NEAR(count[k], kDraws / kN, 460) << k;
}

TEST(Bootstrap, AReplicateIsAResampleOfTheItems) {
  constexpr size_t kN = 5;
  constexpr int kReplicates = 10000;
  int calls = 0;
  std::vector<double> mean(kN, 0.0), square(kN, 0.0);
  resample(kN, kReplicates, 3, [&](const std::vector<double>& w) {
    ++calls;
    ASSERT_EQ(w.size(), kN);
    EXPECT_EQ(std::accumulate(w.begin(), w.end(), 0.0), static_cast<double>(kN));
    for (size_t i = 0; i < kN; ++i) {
      EXPECT_EQ(w[i], std::floor(w[i]));
      mean[i] += w[i] / kReplicates;
      square[i] += w[i] * w[i] / kReplicates;
    }
  });
  EXPECT_EQ(calls, kReplicates);
  // Multinomial(n, 1/n each): every count has mean 1 and variance 1 - 1/n.
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_NEAR(mean[i], 1.0, 0.05) << i;
    EXPECT_NEAR(square[i] - mean[i] * mean[i], 1.0 - 1.0 / kN, 0.06) << i;
  }
}

TEST(Bootstrap, TheSameSeedGivesTheSameResamples) {
  auto weights = [](uint64_t seed) {
    std::vector<std::vector<double>> out;
    resample(6, 50, seed, [&](const std::vector<double>& w) { out.push_back(w); });
    return out;
  };
  const auto a = weights(5);
  ASSERT_EQ(a.size(), 50u);
  EXPECT_EQ(a, weights(5));
  EXPECT_NE(a, weights(6));
}

// The bootstrap standard error of a mean over n items is the sample's standard deviation
// times sqrt((n - 1) / n) / sqrt(n): the spread of a mean of n draws from the sample.
TEST(Bootstrap, TheReplicatesOfAMeanSpreadAsTheSampleOverRootN) {
  std::mt19937_64 gen(1);
  std::normal_distribution<double> normal(3.0, 2.0);
  constexpr size_t kN = 40;
  std::vector<double> data(kN);
  for (auto& x : data) x = normal(gen);
  const double data_mean = std::accumulate(data.begin(), data.end(), 0.0) / kN;
  double ss = 0;
  for (double x : data) ss += (x - data_mean) * (x - data_mean);
  const double expected_se = std::sqrt(ss / (kN - 1)) * std::sqrt((kN - 1.0) / kN) / std::sqrt(double(kN));
  std::vector<double> means;
  resample(kN, 8000, 9, [&](const std::vector<double>& w) {
    double s = 0;
    for (size_t i = 0; i < kN; ++i) s += w[i] * data[i];
    means.push_back(s / kN);
  });
  const double m = std::accumulate(means.begin(), means.end(), 0.0) / means.size();
  double v = 0;
  for (double x : means) v += (x - m) * (x - m);
  const double se = std::sqrt(v / (means.size() - 1));
  ASSERT_GT(expected_se, 0.1);
  EXPECT_NEAR(m, data_mean, 0.05 * expected_se);
  EXPECT_NEAR(se / expected_se, 1.0, 0.05);
}

TEST(Bootstrap, TheReachIsStudentsTTimesRootNOverNMinusOne) {
  // t_{0.975, df} from any table.
  EXPECT_NEAR(bootstrap_reach(2), 12.706204736174705 * std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(bootstrap_reach(3), 4.302652729911275 * std::sqrt(1.5), 1e-9);
  EXPECT_NEAR(bootstrap_reach(5), 2.7764451051977987 * std::sqrt(1.25), 1e-9);
  EXPECT_NEAR(bootstrap_reach(100001), 1.959966, 1e-4);  // the normal's 1.96 in the limit
}

TEST(Bootstrap, TheIntervalIsTheEstimateWithinReachStandardErrors) {
  const std::vector<double> reps{1.0, 2.0, 3.0, 4.0};  // sample sd sqrt(5/3)
  const double half = bootstrap_reach(5) * std::sqrt(5.0 / 3.0);
  const auto linear = bootstrap_interval(reps, 2.0, 5, IntervalScale::kLinear);
  ASSERT_TRUE(linear);
  EXPECT_NEAR(linear->first, 2.0 - half, 1e-12);
  EXPECT_NEAR(linear->second, 2.0 + half, 1e-12);
  // On the log scale: the same replicates as exp(x) give exp(log(estimate) -/+ half).
  std::vector<double> ratios;
  for (double x : reps) ratios.push_back(std::exp(x));
  const auto log = bootstrap_interval(ratios, 0.5, 5, IntervalScale::kLog);
  ASSERT_TRUE(log);
  EXPECT_NEAR(std::log(log->first), std::log(0.5) - half, 1e-12);
  EXPECT_NEAR(std::log(log->second), std::log(0.5) + half, 1e-12);
  EXPECT_NEAR(log->first * log->second, 0.25, 1e-12);  // symmetric about 0.5 as ratios are
  // Fewer than two replicates have no spread: no interval.
  EXPECT_FALSE(bootstrap_interval({1.0}, 1.0, 5, IntervalScale::kLinear));
  EXPECT_FALSE(bootstrap_interval({}, 1.0, 5, IntervalScale::kLinear));
}
