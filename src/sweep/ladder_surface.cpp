// The fit across a ladder's data ratios (see ladder_surface.h).
#include "sweep/ladder_surface.h"

#include "stats/huber_surface.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace xsagpt {

using json = nlohmann::json;

namespace {

json fit_json(const SurfaceFit& f) {
  if (!f.law) return {{"points", f.points}, {"why", f.why}};
  const auto& s = *f.law;
  return {{"E", s.E},
          {"A", s.A},
          {"alpha", s.alpha},
          {"B", s.B},
          {"beta", s.beta},
          {"points", f.points},
          {"objective", f.objective},
          {"e_cap", f.e_cap},
          {"e_capped", f.e_capped},
          {"starts", f.starts}};
}

// A surface's compute-optimal point for budget c.
json optimum_json(const Surface& s, double c) {
  const auto [n, d] = s.optimal(c);
  return {{"params", n}, {"tokens", d}, {"ratio", d / n}, {"loss", s.frontier().loss(c)}};
}

}  // namespace

json ladder_surface(const std::vector<SurfaceObservation>& obs, const std::string& baseline,
                    const std::vector<std::string>& variants,
                    const std::vector<std::pair<std::string, double>>& budgets, double extrapolate_decades) {
  std::map<std::string, std::vector<SurfacePoint>> points;
  double lo = INFINITY, hi = 0;              // the points' budgets, 6 N D
  double ratio_lo = INFINITY, ratio_hi = 0;  // and their ratios, D / N
  for (const auto& o : obs) {
    points[o.variant].push_back({o.params, o.tokens, o.loss});
    lo = std::min(lo, 6 * o.params * o.tokens), hi = std::max(hi, 6 * o.params * o.tokens);
    ratio_lo = std::min(ratio_lo, o.tokens / o.params), ratio_hi = std::max(ratio_hi, o.tokens / o.params);
  }
  // An optimum at a ratio no point trained at reads the surface's D term where nothing
  // pins it (two ratios a factor of 2 apart put the optimum anywhere from 1e2 to 1e8): no
  // multiplier from it. The range is the points' own D / N, which whole steps move off
  // the ratios asked for (4.92 for 5 at the CPU ladder's d2); 1e-6 is floating-point slack.
  auto outside = [&](const json& at) {
    const double r = at["ratio"].get<double>();
    return r < ratio_lo * (1 - 1e-6) || r > ratio_hi * (1 + 1e-6)
               ? std::optional<std::string>(
                     fmt::format("its compute-optimal ratio, {:.3g} tokens per parameter, lies outside the ratios "
                                 "trained ({:.3g}-{:.3g}), where the surface is not pinned down",
                                 r, ratio_lo, ratio_hi))
               : std::nullopt;
  };
  std::map<std::string, std::optional<Surface>> law;
  json out = {{"fits", json::object()}, {"budgets", json::array()}};
  std::vector<std::string> all{baseline};
  all.insert(all.end(), variants.begin(), variants.end());
  for (const auto& v : all) {
    const auto f = fit_huber_surface(points[v]);
    law[v] = f.law;
    out["fits"][v] = fit_json(f);
  }
  for (const auto& [name, c] : budgets) {
    const double past = c > hi ? std::log10(c / hi) : c < lo ? std::log10(lo / c) : 0;
    json row = {{"name", name},
                {"compute", c},
                {"decades_past_ladder", past},
                {"baseline", nullptr},
                {"variants", json::object()}};
    if (past > extrapolate_decades) {
      row["why"] =
          fmt::format("{:.1f} decades past the points' budgets (at most {:g} carried)", past, extrapolate_decades);
      out["budgets"].push_back(row);
      continue;
    }
    const auto& b = law[baseline];
    if (b) row["baseline"] = optimum_json(*b, c);
    for (const auto& v : variants) {
      json cell = law[v] ? optimum_json(*law[v], c) : json{{"why", "no surface for " + v}};
      cell["multiplier"] = nullptr;
      if (!b) {
        cell["why"] = "no surface for the baseline " + baseline;
      } else if (law[v]) {
        const auto cb = b->frontier().compute_at(cell["loss"].get<double>());
        if (!cb)
          cell["why"] = fmt::format(
              "its loss {:.4f} is at or below the baseline's E {:.4f}: the baseline never "
              "reaches it",
              cell["loss"].get<double>(), b->E);
        else if (const auto far = outside(cell))
          cell["why"] = *far;
        else if (const auto far_b = outside(optimum_json(*b, *cb)))
          cell["why"] = "the baseline's, at the budget it needs to reach that loss: " + *far_b;
        else
          cell["multiplier"] = c / *cb;
      }
      row["variants"][v] = cell;
    }
    out["budgets"].push_back(row);
  }
  return out;
}

}  // namespace xsagpt
