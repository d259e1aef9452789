// The ladder's tests at each rung (sweep/ladder_analysis.h, sweep/ladder_report.h): three
// variants against one baseline over three seeds, where each variant's paired t-test at a
// rung is one of a family of three, Holm-adjusted together; and the baseline's own
// seed-to-seed spread beside the differences as the noise floor. References by hand: the
// t CDF with 2 degrees of freedom in closed form, P(|T| >= t) = 1 - t / sqrt(2 + t^2), the
// sample standard deviation, and Holm's step-down rule on three sorted p-values.
#include "sweep/ladder_analysis.h"
#include "sweep/ladder_report.h"
#include "sweep/text_table.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

constexpr std::array<const char*, 3> kRungTestVariants{"a", "b", "c"};

// Loss of each variant (sa first) at rung r and seed s: a curve falling with the rung, a
// per-variant gap, and per-seed noise that differs between variants so that every paired
// difference has a spread.
double rung_test_loss(size_t v, int r, int s) {
  static const double gap[] = {0.0, -0.03, 0.004, -0.01};
  static const double noise[4][3] = {
      {0.011, -0.004, -0.007}, {0.002, 0.009, -0.006}, {-0.008, 0.013, 0.001}, {0.005, -0.002, 0.012}};
  return 4.0 - 0.3 * r + gap[v] + noise[v][s] * (1 + 0.5 * r);
}

double p_two_sided_df2(double t) { return 1.0 - std::fabs(t) / std::sqrt(2.0 + t * t); }

}  // namespace

TEST(LadderRungTests, PValuesAreHolmAdjustedAcrossTheVariantsBesideTheBaselinesSpread) {
  std::vector<LadderObservation> obs;
  const std::vector<std::string> names{"sa", "a", "b", "c"};
  for (size_t v = 0; v < names.size(); ++v)
    for (int r = 0; r < 4; ++r)
      for (int s = 0; s < 3; ++s)
        obs.push_back({names[v], r, s + 1, 1e17 * std::pow(10.0, r), rung_test_loss(v, r, s)});
  LadderOptions opt;
  opt.baseline = "sa";
  opt.variants = {"a", "b", "c"};
  opt.bootstrap = 0;
  opt.huber = false;
  const auto an = ladder_analysis(obs, opt);
  size_t moved = 0;
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    const auto& rung = an["rungs"][r];
    // The noise floor: the baseline's sample sd over its three seeds.
    double mean = 0, ss = 0;
    for (int s = 0; s < 3; ++s) mean += rung_test_loss(0, r, s) / 3;
    for (int s = 0; s < 3; ++s) ss += std::pow(rung_test_loss(0, r, s) - mean, 2);
    EXPECT_NEAR(rung["baseline"]["sd"].get<double>(), std::sqrt(ss / 2), 1e-15);
    // Each variant's p by hand, then Holm's rule on the three.
    std::array<double, 3> p{};
    for (size_t v = 1; v <= 3; ++v) {
      double dm = 0, dss = 0;
      std::array<double, 3> d{};
      for (int s = 0; s < 3; ++s) dm += (d[s] = rung_test_loss(v, r, s) - rung_test_loss(0, r, s)) / 3;
      for (double x : d) dss += (x - dm) * (x - dm);
      p[v - 1] = p_two_sided_df2(dm / (std::sqrt(dss / 2) / std::sqrt(3.0)));
      EXPECT_NEAR(rung["variants"][kRungTestVariants[v - 1]]["difference_p"].get<double>(), p[v - 1], 1e-12);
    }
    std::array<size_t, 3> order{0, 1, 2};
    std::sort(order.begin(), order.end(), [&](size_t i, size_t j) { return p[i] < p[j]; });
    std::array<double, 3> want{};
    double running = 0;
    for (size_t k = 0; k < 3; ++k) want[order[k]] = running = std::max(running, std::min(1.0, (3.0 - k) * p[order[k]]));
    for (size_t v = 0; v < 3; ++v) {
      const auto& x = rung["variants"][kRungTestVariants[v]];
      EXPECT_EQ(x["holm_m"], 3);
      EXPECT_NEAR(x["difference_p_holm"].get<double>(), want[v], 1e-12);
      moved += want[v] > p[v];
    }
  }
  EXPECT_GT(moved, 4u);  // the adjustment changed something to check

  nlohmann::json rows = nlohmann::json::array();
  for (int i = 0; i < 4; ++i)
    rows.push_back({{"name", fmt::format("d{}", i + 1)}, {"params", 1e6}, {"tokens", 1e7}, {"flops", 1e17}});
  const nlohmann::json summary = {{"baseline", "sa"},
                                  {"variants", {"sa", "a", "b", "c"}},
                                  {"ladder",
                                   {{"rules", {{"size", "s"}, {"tokens", "t"}, {"lr", "l"}, {"schedule", "sc"}}},
                                    {"rungs", rows},
                                    {"left_out", nlohmann::json::array()},
                                    {"analysis", an}}}};
  const auto md = ladder_markdown(summary);
  EXPECT_THAT(md, HasSubstr("Holm-adjusted across the 3 variants compared with sa at each rung"));
  EXPECT_THAT(md, HasSubstr("sa sd (noise floor)"));
  const auto& first = an["rungs"][0];
  EXPECT_THAT(md, HasSubstr(fmt::format("| {} |", bounded_fixed(first["baseline"]["sd"].get<double>(), 4))));
  const auto& a0 = first["variants"]["a"];
  EXPECT_THAT(md, HasSubstr(fmt::format("; p {:.3g}, Holm {:.3g}", a0["difference_p"].get<double>(),
                                        a0["difference_p_holm"].get<double>())));
  EXPECT_THAT(ladder_table(summary), HasSubstr("sa sd (noise floor)"));
}

// With two seeds the baseline has a spread, but too few seeds for a noise floor worth printing.
TEST(LadderRungTests, UnderThreeSeedsThereIsNoNoiseFloor) {
  std::vector<LadderObservation> obs;
  for (const char* v : {"sa", "a"})
    for (int r = 0; r < 2; ++r)
      for (int s = 0; s < 2; ++s) obs.push_back({v, r, s + 1, 1e17 * (r + 1), 4.0 - 0.1 * r + 0.01 * s});
  LadderOptions opt;
  opt.baseline = "sa";
  opt.variants = {"a"};
  opt.bootstrap = 0;
  opt.huber = false;
  const auto an = ladder_analysis(obs, opt);
  ASSERT_TRUE(an["rungs"][0]["baseline"]["sd"].is_number());
  const nlohmann::json summary = {{"baseline", "sa"},
                                  {"variants", {"sa", "a"}},
                                  {"ladder",
                                   {{"rules", {{"size", "s"}, {"tokens", "t"}, {"lr", "l"}, {"schedule", "sc"}}},
                                    {"rungs",
                                     {{{"name", "d1"}, {"params", 1e6}, {"tokens", 1e7}, {"flops", 1e17}},
                                      {{"name", "d2"}, {"params", 2e6}, {"tokens", 2e7}, {"flops", 4e17}}}},
                                    {"left_out", nlohmann::json::array()},
                                    {"analysis", an}}}};
  EXPECT_THAT(ladder_markdown(summary), HasSubstr("- (under 3 seeds)"));
}
