// xsagpt_scaling_fit: the power-law fits of stats/scaling_fit.h and the line of
// stats/line_fit.h on numbers from stdin, for the checks against scipy.optimize and
// scipy.stats in tests/python/sweep/test_scaling_fit.py.
//
// Input (JSON):  {"fits": [{"compute": [...], "loss": [...], "e": null | E}, ...],
//                 "shared": [[{"compute": [...], "loss": [...]}, ...], ...],
//                 "lines": [{"x": [...], "y": [...]}, ...],
//                 "huber": [{"compute": [...], "loss": [...]}, ...],
//                 "surfaces": [{"params": [...], "tokens": [...], "loss": [...], "budgets": [...]}, ...]}
// Output (JSON): {"fits": [{"E", "A", "alpha", "sse"} | {"why"}, ...],
//                 "shared": [[{"E", "A", "alpha", "sse"} | {"why"}, ...], ...],
//                 "lines": [{"slope", "intercept", "se", "ci": [lo, hi] | null} | null, ...],
//                 "huber": [{"E", "A", "alpha", "objective", "e_capped"} | {"why"}, ...],
//                 "surfaces": [{"E", "A", "alpha", "B", "beta", "objective", "e_capped",
//                               "optimal": [{"params", "tokens", "loss"} per budget]} | {"why"}, ...]}
// (stats/huber_surface.h; "loss" at a budget is its compute-optimal frontier's)
#include "stats/scaling_fit.h"
#include "stats/huber_fit.h"
#include "stats/huber_surface.h"
#include "stats/line_fit.h"

#include <nlohmann/json.hpp>

#include <iostream>

namespace {

using nlohmann::json;

xsagpt::CurvePoints curve_of(const json& c) {
  xsagpt::CurvePoints p;
  const auto compute = c["compute"].get<std::vector<double>>();
  const auto loss = c["loss"].get<std::vector<double>>();
  for (size_t i = 0; i < compute.size() && i < loss.size(); ++i) p.add(compute[i], loss[i]);
  return p;
}

json fit_json(const xsagpt::PowerLawFit& f) {
  if (!f.law) return {{"why", f.why}};
  return {{"E", f.law->E}, {"A", f.law->A}, {"alpha", f.law->alpha}, {"sse", f.sse}};
}

}  // namespace

int main() {
  const json in = json::parse(std::cin);
  json out = {{"fits", json::array()}, {"shared", json::array()}, {"lines", json::array()}};
  for (const auto& c : in.value("fits", json::array())) {
    const auto e = c.value("e", json());
    out["fits"].push_back(fit_json(
        xsagpt::fit_power_law(curve_of(c), e.is_number() ? std::optional<double>(e.get<double>()) : std::nullopt)));
  }
  for (const auto& group : in.value("shared", json::array())) {
    std::vector<xsagpt::CurvePoints> curves;
    for (const auto& c : group) curves.push_back(curve_of(c));
    json fits = json::array();
    for (const auto& f : xsagpt::fit_shared_e(curves)) fits.push_back(fit_json(f));
    out["shared"].push_back(fits);
  }
  for (const auto& l : in.value("lines", json::array())) {
    const auto f = xsagpt::fit_line(l["x"].get<std::vector<double>>(), l["y"].get<std::vector<double>>());
    if (!f) {
      out["lines"].push_back(nullptr);
      continue;
    }
    out["lines"].push_back({{"slope", f->slope},
                            {"intercept", f->intercept},
                            {"se", f->se ? json(*f->se) : json(nullptr)},
                            {"ci", f->ci_low ? json::array({*f->ci_low, *f->ci_high}) : json(nullptr)}});
  }
  out["huber"] = json::array();
  for (const auto& c : in.value("huber", json::array())) {
    std::vector<xsagpt::HuberPoint> pts;
    const auto compute = c["compute"].get<std::vector<double>>();
    const auto loss = c["loss"].get<std::vector<double>>();
    for (size_t i = 0; i < compute.size() && i < loss.size(); ++i) pts.push_back({compute[i], loss[i]});
    const auto f = xsagpt::fit_huber_power_law(pts);
    if (!f.law) {
      out["huber"].push_back({{"why", f.why}});
      continue;
    }
    out["huber"].push_back({{"E", f.law->E},
                            {"A", f.law->A},
                            {"alpha", f.law->alpha},
                            {"objective", f.objective},
                            {"e_capped", f.e_capped}});
  }
  out["surfaces"] = json::array();
  for (const auto& c : in.value("surfaces", json::array())) {
    std::vector<xsagpt::SurfacePoint> pts;
    const auto n = c["params"].get<std::vector<double>>(), d = c["tokens"].get<std::vector<double>>(),
               loss = c["loss"].get<std::vector<double>>();
    for (size_t i = 0; i < n.size() && i < d.size() && i < loss.size(); ++i) pts.push_back({n[i], d[i], loss[i]});
    const auto f = xsagpt::fit_huber_surface(pts);
    if (!f.law) {
      out["surfaces"].push_back({{"why", f.why}});
      continue;
    }
    const auto& law = *f.law;
    json optimal = json::array();
    for (const double budget : c.value("budgets", std::vector<double>{})) {
      const auto [np, dp] = law.optimal(budget);
      optimal.push_back({{"params", np}, {"tokens", dp}, {"loss", law.frontier().loss(budget)}});
    }
    out["surfaces"].push_back({{"E", law.E},
                               {"A", law.A},
                               {"alpha", law.alpha},
                               {"B", law.B},
                               {"beta", law.beta},
                               {"objective", f.objective},
                               {"e_capped", f.e_capped},
                               {"optimal", optimal}});
  }
  std::cout << out.dump() << "\n";  // doubles as the shortest text that reads back exactly
  return 0;
}
