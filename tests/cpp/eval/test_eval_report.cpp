// `xsagpt eval`'s report comparing variants with any names against a named baseline,
// paired by seed (the paired statistics themselves are tests/cpp/stats/test_paired.cpp's).
#include "eval/report.h"
#include "helpers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

using namespace xsagpt;
using ::testing::HasSubstr;

namespace {

eval::ModelEval model_with(const std::string& label, const json& model, int seed, double acc) {
  eval::ModelEval m;
  m.checkpoint = label + std::to_string(seed);
  m.label = label;
  m.model = model;
  m.seed = seed;
  eval::TaskMetrics r;
  r.acc = acc;
  r.acc_stderr = 0.01;
  r.n = 100;
  m.results.push_back(r);
  return m;
}

}  // namespace

// Three variants x three seeds, given in mixed order: each non-baseline model is paired
// with the baseline model of its seed, and each variant's differences over its seeds get
// the t interval (t_{0.975, 2} = 4.302652729911275, from any table) and a p.
TEST(EvalReport, ComparesAnyVariantNamesWithTheNamedBaseline) {
  const json base = {{"attention", "sa"}, {"n_layer", 2}};
  json gated = base, last = base;
  gated["attention"] = last["attention"] = "xsa";
  gated["xsa_gate"] = "sa";
  last["xsa_layers"] = "last 1";
  const std::vector<double> sa_acc{0.50, 0.52, 0.49}, gated_acc{0.53, 0.54, 0.50}, last_acc{0.48, 0.52, 0.47};
  std::vector<eval::ModelEval> models;
  for (int s : {3, 1, 2}) models.push_back(model_with("xsa-gated", gated, s, gated_acc[s - 1]));
  for (int s : {1, 2, 3}) models.push_back(model_with("sa", base, s, sa_acc[s - 1]));
  for (int s : {2, 3, 1}) models.push_back(model_with("", last, s, last_acc[s - 1]));  // named by its keys
  const auto report = eval::eval_report({"task"}, models, "sa");
  EXPECT_EQ(report["baseline"], "sa");
  EXPECT_EQ(report["models"][6]["variant"], "xsa layers=last 1");
  for (const auto& d : report["differences"]) {
    const auto& a = report["models"][d["baseline"].get<size_t>()];
    const auto& b = report["models"][d["model"].get<size_t>()];
    EXPECT_EQ(a["variant"], "sa");
    EXPECT_EQ(a["seed"], b["seed"]);
  }
  ASSERT_EQ(report["comparisons"].size(), 2u);
  for (const auto& c : report["comparisons"]) {
    const auto& accs = c["variant"] == "xsa-gated" ? gated_acc : last_acc;
    std::vector<double> d;
    for (int s = 0; s < 3; ++s) d.push_back(accs[s] - sa_acc[s]);
    const double mean = (d[0] + d[1] + d[2]) / 3;
    double ss = 0;
    for (double x : d) ss += (x - mean) * (x - mean);
    const double half = 4.302652729911275 * std::sqrt(ss / 2) / std::sqrt(3.0);
    const auto& acc = c["average"]["acc"];
    EXPECT_EQ(acc["n"], 3);
    EXPECT_NEAR(acc["mean"].get<double>(), mean, 1e-12);
    EXPECT_NEAR(acc["ci95"][0].get<double>(), mean - half, 1e-9);
    EXPECT_NEAR(acc["ci95"][1].get<double>(), mean + half, 1e-9);
    EXPECT_GT(acc["p"].get<double>(), 0.0);
  }
  // Two variants against one baseline: each task's (and the average's) p-values are Holm-adjusted as a
  // family of 2: the smaller doubled, the larger kept unless below that (both p's differ here).
  for (const char* where : {"results", "average"}) {
    auto of = [&](size_t i) -> const json& {
      const auto& c = report["comparisons"][i];
      return std::string(where) == "average" ? c["average"]["acc"] : c["results"]["task"]["acc"];
    };
    const double p0 = of(0)["p"].get<double>(), p1 = of(1)["p"].get<double>();
    ASSERT_NE(p0, p1);
    const double lo = std::min(1.0, 2 * std::min(p0, p1)), hi = std::max(lo, std::max(p0, p1));
    EXPECT_EQ(of(0)["holm_m"], 2);
    EXPECT_DOUBLE_EQ(of(0)["p_holm"].get<double>(), p0 < p1 ? lo : hi);
    EXPECT_DOUBLE_EQ(of(1)["p_holm"].get<double>(), p1 < p0 ? lo : hi);
  }
  // Beside each difference, the noise floor: sa's own sample sd over its three seeds.
  const double sa_mean = (sa_acc[0] + sa_acc[1] + sa_acc[2]) / 3;
  double sa_ss = 0;
  for (double x : sa_acc) sa_ss += (x - sa_mean) * (x - sa_mean);
  const double floor = std::sqrt(sa_ss / 2);
  for (const auto& c : report["comparisons"]) {
    EXPECT_EQ(c["average"]["acc"]["baseline_n"], 3);
    EXPECT_NEAR(c["average"]["acc"]["baseline_sd"].get<double>(), floor, 1e-15);
  }
  const auto table = eval::eval_table(report);
  EXPECT_THAT(table, HasSubstr(fmt::format(" floor={:.4f}", floor)));
  EXPECT_THAT(table, HasSubstr("variant - sa over paired seeds"));
  EXPECT_THAT(table, HasSubstr("Holm: p Holm-adjusted across the 2 variants compared with it"));
  EXPECT_THAT(
      table, HasSubstr(fmt::format("Holm={:.3g}", report["comparisons"][0]["average"]["acc"]["p_holm"].get<double>())));
  EXPECT_THAT(table, HasSubstr("xsa layers=last 1"));
  EXPECT_THAT(test::error_of<ConfigError>([&] { eval::eval_report({"task"}, models, "xsa"); }),
              HasSubstr("--baseline: 'xsa' is none of the models' variants (xsa-gated, sa, xsa layers=last 1)"));
  // Without --baseline the first model's variant is the baseline; one seed each: no interval.
  const auto two = eval::eval_report({"task"}, {models[1], models[3]});
  EXPECT_EQ(two["baseline"], "xsa-gated");
  EXPECT_TRUE(two["comparisons"][0]["average"]["acc"]["ci95"].is_null());
  EXPECT_THAT(eval::eval_table(two), HasSubstr("(one pair: no interval)"));
  EXPECT_THAT(eval::eval_table(two), ::testing::Not(HasSubstr("floor=")));  // one baseline seed: no floor
}
