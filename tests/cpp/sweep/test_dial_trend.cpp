// The trend along a numeric grid key (sweep/dial_trend.h): differences that are exactly
// a + b log2(seq_len) give slope b with no spread, per setting of the other keys; keys
// that are no dial; pairs not yet finished; the report's table; and the shipped
// sequence-length sweep of the older form (model.attention in its grid) finds its dial.
// The interval against scipy.stats.linregress: tests/python/sweep/test_scaling_fit.py,
// and on a real sweep tests/python/sweep/test_sweep.py.
#include "helpers.h"
#include "sweep/dial_trend.h"
#include "sweep/report.h"
#include "sweep/summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

// A summary of the older form: model.attention's values are the variants, the
// differences' values hold every other key.
json seqlen_summary(const std::function<double(double lr, int64_t seq_len, int64_t seed)>& diff) {
  json s = {{"keys", {"model.attention", "train.lr", "train.seed", "train.seq_len"}},
            {"baseline", "sa"},
            {"differences", json::array()}};
  for (double lr : {1e-3, 2e-3})
    for (int64_t seq_len : {512, 1024, 2048, 4096, 8192, 16384})
      for (int64_t seed : {1, 2})
        s["differences"].push_back({{"values", {{"train.lr", lr}, {"train.seed", seed}, {"train.seq_len", seq_len}}},
                                    {"variant", "xsa"},
                                    {"val_loss_minus_baseline", diff(lr, seq_len, seed)}});
  return s;
}

const json* trend_at(const json& trends, const std::string& key, const json& values) {
  for (const auto& t : trends)
    if (t["key"] == key && t["values"] == values) return &t;
  return nullptr;
}

}  // namespace

TEST(DialTrend, ADifferenceLinearInLog2OfTheKeyHasThatSlope) {
  // a + b log2(seq_len), b depending on the learning rate; the seeds agree exactly.
  auto b_of = [](double lr) { return lr < 1.5e-3 ? -0.004 : -0.011; };
  const auto trends = dial_trends(seqlen_summary(
      [&](double lr, int64_t seq_len, int64_t) { return 0.02 + b_of(lr) * std::log2(static_cast<double>(seq_len)); }));
  for (double lr : {1e-3, 2e-3}) {
    const json* t = trend_at(trends, "train.seq_len", {{"train.lr", lr}});
    ASSERT_NE(t, nullptr) << trends.dump();
    EXPECT_EQ((*t)["variant"], "xsa");
    EXPECT_EQ((*t)["n"], 12);
    EXPECT_EQ((*t)["df"], 10);
    EXPECT_NEAR((*t)["slope"].get<double>(), b_of(lr), 1e-12);
    EXPECT_NEAR((*t)["ci95"][0].get<double>(), b_of(lr), 1e-9);  // no residual: the interval is the slope
    EXPECT_NEAR((*t)["ci95"][1].get<double>(), b_of(lr), 1e-9);
    ASSERT_EQ((*t)["levels"].size(), 6u);
    EXPECT_EQ((*t)["levels"][0]["value"], 512);
    EXPECT_NEAR((*t)["levels"][5]["mean"].get<double>(), 0.02 + 14 * b_of(lr), 1e-12);
  }
  // The learning rate is a numeric key too: its trend at each sequence length, over two rates.
  const json* by_lr = trend_at(trends, "train.lr", {{"train.seq_len", 4096}});
  ASSERT_NE(by_lr, nullptr);
  EXPECT_NEAR(by_lr->at("slope").get<double>(), 12 * (-0.011 - -0.004), 1e-9);  // one doubling of lr
  EXPECT_EQ(trends.size(), 2u + 6u);
}

TEST(DialTrend, OnlyPositiveNumericKeysWithTwoValuesAreDialsAndUnfinishedPairsWait) {
  auto summary = seqlen_summary([](double, int64_t seq_len, int64_t seed) {
    return seq_len > 1024 ? std::nan("") : 0.01 * static_cast<double>(seed);
  });
  for (auto& d : summary["differences"]) {
    if (!std::isfinite(d["val_loss_minus_baseline"].get<double>())) d["val_loss_minus_baseline"] = nullptr;
    d["values"]["train.lr"] = d["values"]["train.lr"].get<double>() < 1.5e-3 ? 0.0 : 1e-3;  // 0: no log2
  }
  const auto trends = dial_trends(summary);
  for (const auto& t : trends) EXPECT_EQ(t["key"], "train.seq_len");  // not the seed, not lr with its 0
  ASSERT_EQ(trends.size(), 2u);
  const auto& t = trends[0];
  EXPECT_EQ(t["n"], 4);  // 512 and 1024, two seeds; the rest not finished
  EXPECT_NEAR(t["slope"].get<double>(), 0.0, 1e-12);
  // Only 512 finished: no slope, and why.
  for (auto& d : summary["differences"])
    if (d["values"]["train.seq_len"] == 1024) d["val_loss_minus_baseline"] = nullptr;
  const auto one_level = dial_trends(summary)[0];
  EXPECT_TRUE(one_level["slope"].is_null());
  EXPECT_THAT(one_level["why"].get<std::string>(), HasSubstr("finished pairs at 1 value(s) of train.seq_len"));
  // A key with a string value is no dial.
  summary["differences"][0]["values"]["train.seq_len"] = "long";
  EXPECT_TRUE(dial_trends(summary).empty());
}

TEST(DialTrend, TheReportHasATableOfTrends) {
  auto summary = seqlen_summary([](double, int64_t seq_len, int64_t seed) {
    return -0.003 * std::log2(static_cast<double>(seq_len)) + (seed == 1 ? 0.001 : -0.001);
  });
  summary["trends"] = dial_trends(summary);
  summary["comparisons"] = json::array();
  summary["points"] = json::array();
  const auto md = sweep_report(summary, "sw");
  EXPECT_THAT(md, HasSubstr("## Trend along the grid's numeric keys"));
  // Seeds +-0.001 about the line: residual sd 0.001 * sqrt(12 / 10), sum of squares of log2 seq_len 35, t(10) 2.228.
  EXPECT_THAT(md,
              HasSubstr("| xsa | train.seq_len | train.lr=0.001 | -0.0030 | [-0.0034, -0.0026] | 12 | 512: -0.0270, "
                        "1024: -0.0300,"));
  EXPECT_THAT(comparison_table(summary), HasSubstr("Trend along the grid's numeric keys"));
}

class ShippedSeqLenSweep : public test::TempDirTest {};

TEST_F(ShippedSeqLenSweep, FindsItsSequenceLengthDial) {
  // configs/sweeps/paper-seqlen-1.4b.json as shipped, its base found from here and its
  // directory a scratch one: the older form, model.attention's sa and xsa the variants.
  json spec = json::parse(test::slurp(std::string(XSAGPT_SOURCE_DIR) + "/configs/sweeps/paper-seqlen-1.4b.json"));
  spec["base"] = std::string(XSAGPT_SOURCE_DIR) + "/configs/sweeps/" + spec["base"].get<std::string>();
  spec["out_dir"] = (tmp / "sw").string();
  std::ofstream(tmp / "seqlen.json") << spec.dump();
  const auto sweep = load_sweep((tmp / "seqlen.json").string(), 1);
  ASSERT_EQ(sweep.variant_key, "model.attention");
  const auto s = sweep_summary(sweep);
  ASSERT_EQ(s["trends"].size(), 1u) << s["trends"].dump();
  const auto& t = s["trends"][0];
  EXPECT_EQ(t["key"], "train.seq_len");
  EXPECT_EQ(t["variant"], "xsa");
  EXPECT_EQ(t["n"], 0);  // nothing has run
  EXPECT_THAT(t["why"].get<std::string>(), HasSubstr("finished pairs at 0 value(s)"));
}
