// xsagpt_paired_stats: stats/paired.h and stats/holm.h on numbers from stdin, for the
// checks against scipy.stats in tests/python/sweep/test_paired_stats.py and against
// Holm's procedure in tests/python/sweep/test_holm.py.
//
// Input (JSON):  {"p": [[t, df], ...], "critical": [[level, df], ...], "paired": [[d, ...], ...],
//                 "holm": [[p | null, ...], ...]}
// Output (JSON): {"p": [two-sided p, ...], "critical": [t, ...],
//                 "paired": [{"n", "mean", "sd", "ci": [lo, hi] | null, "t", "p"}, ...],
//                 "holm": [{"adjusted": [p | null, ...], "m"}, ...] (or {"error"} for a p-value refused)}
#include "stats/holm.h"
#include "stats/paired.h"

#include <nlohmann/json.hpp>

#include <iostream>

int main() {
  using nlohmann::json;
  const json in = json::parse(std::cin);
  json out = {{"p", json::array()}, {"critical", json::array()}, {"paired", json::array()}, {"holm", json::array()}};
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  for (const auto& q : in.value("p", json::array()))
    out["p"].push_back(xsagpt::t_two_sided_p(q[0].get<double>(), q[1].get<int64_t>()));
  for (const auto& q : in.value("critical", json::array()))
    out["critical"].push_back(xsagpt::t_critical(q[0].get<double>(), q[1].get<int64_t>()));
  for (const auto& d : in.value("paired", json::array())) {
    const auto s = xsagpt::paired_stats(d.get<std::vector<double>>());
    out["paired"].push_back({{"n", s.n},
                             {"mean", s.mean},
                             {"sd", opt(s.sd)},
                             {"ci", s.ci_low ? json::array({*s.ci_low, *s.ci_high}) : json(nullptr)},
                             {"t", opt(s.t)},
                             {"p", opt(s.p)}});
  }
  for (const auto& family : in.value("holm", json::array())) {
    std::vector<std::optional<double>> p;
    for (const auto& x : family) p.push_back(x.is_null() ? std::nullopt : std::optional<double>(x.get<double>()));
    try {
      json adjusted = json::array();
      for (const auto& a : xsagpt::holm_adjust(p)) adjusted.push_back(opt(a));
      out["holm"].push_back({{"adjusted", adjusted}, {"m", xsagpt::holm_family_size(p)}});
    } catch (const std::exception& e) {
      out["holm"].push_back({{"error", e.what()}});
    }
  }
  std::cout << out.dump() << "\n";  // doubles as the shortest text that reads back exactly
  return 0;
}
